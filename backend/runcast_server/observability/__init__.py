"""The operator's view: Prometheus instruments (``prometheus``), their ``/metrics`` exposition
(``http``) and JSON logs (``logs``). It imports no other package of the server: what it reads of
a domain (the inbox's gauges, ``inbox.gauges``) is handed to it at start."""
