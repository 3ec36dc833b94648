"""The operator's view: Prometheus metrics (``metrics``, ``http``) and JSON logs (``logs``). It imports
no other package of the server: what it reads of a domain (the inbox's gauges) is handed to it at start."""
