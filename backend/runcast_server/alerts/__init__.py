"""Alerts: the engine that runs the detectors after a batch commits (``engine``), the stall
sweep (``stall``), storage, subscriptions, notification tasks, webhook signing, SSRF guard,
feeds, email.

See docs/alerts.md. The detectors themselves are pure and live in ``runcast_server.detectors``.
"""
