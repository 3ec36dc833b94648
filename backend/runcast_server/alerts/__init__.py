"""Alerts: storage, subscriptions, notification tasks, webhook signing, SSRF guard, feeds, email.

See docs/alerts.md. The detectors themselves live in ``runcast_server.detectors``.
"""
