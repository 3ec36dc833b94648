"""The operator's view: Prometheus metrics (``metrics``, ``collectors``, ``http``) and JSON logs (``logs``)."""
