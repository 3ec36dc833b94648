"""The process's Prometheus instruments (docs/operations.md lists them for Grafana).

``Metrics`` is built once per process on its own ``CollectorRegistry`` (the API at app
start, onto ``app.state.metrics``; a worker at Celery's ``worker_init``), kept in the
process's application context (``AppContext.metrics``) and handed to whatever records.
With ``PROMETHEUS_MULTIPROC_DIR`` set (production: several API processes and workers of
one host), prometheus-client writes every value to that directory and ``/metrics`` sums
the files of all processes; counts that are the database's (the inbox) are read from the
database at scrape time instead (``inbox.gauges``).
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Sequence
from typing import Any, Final

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram
from runcast.wire import columns

# Accept -> stored: seconds; the inbox sweeper re-enqueues after 30 s, so the tail matters.
LAG_BUCKETS: Final = (0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 300.0, 1800.0)
HTTP_BUCKETS: Final = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0)

# Why /api/v1/ingest refused a batch, by its HTTP status (the route's docstring lists them).
REJECT_REASONS: Final = {
    400: "not_json", 401: "token", 403: "forbidden", 404: "unknown_run", 409: "conflict",
    413: "too_large", 422: "schema", 429: "rate_limited", 503: "unavailable",
}


def multiprocess_dir() -> str | None:
    """prometheus-client's shared directory, when this process runs in multiprocess mode."""
    return os.environ.get("PROMETHEUS_MULTIPROC_DIR") or None


def reject_reason(status: int) -> str:
    return REJECT_REASONS.get(status, f"http_{status}")


def count_points(events: Iterable[dict[str, Any]]) -> int:
    """The points of a validated batch: one per value of each ``metrics`` event, one per non-null
    cell of each ``metrics_columns`` event."""
    return sum(map(columns.points, events))


class Metrics:
    """Every instrument Runcast records, registered on ``registry``."""

    def __init__(self, registry: CollectorRegistry | None = None) -> None:
        self.registry = registry if registry is not None else CollectorRegistry(auto_describe=True)
        r = self.registry
        self.batches_accepted = Counter(
            "runcast_ingest_batches_accepted", "Ingest batches committed to the inbox (HTTP 202).", registry=r)
        self.events_accepted = Counter(
            "runcast_ingest_events_accepted", "Events in the accepted ingest batches.", registry=r)
        self.points_accepted = Counter(
            "runcast_ingest_points_accepted", "Metric points in the accepted ingest batches.", registry=r)
        self.batches_rejected = Counter(
            "runcast_ingest_batches_rejected", "Ingest requests refused, by reason.", ["reason"], registry=r)
        self.points_stored = Counter(
            "runcast_ingest_points_stored", "Metric points written by the ingest task (duplicates excluded).",
            registry=r)
        self.lag = Histogram(
            "runcast_ingest_lag_seconds", "Seconds from a batch's acceptance (202) to its points committed.",
            buckets=LAG_BUCKETS, registry=r)
        self.quarantined = Counter(
            "runcast_ingest_batches_quarantined", "Ingest batches quarantined by the worker.", registry=r)
        self.task_failures = Counter(
            "runcast_task_failures", "Celery tasks that raised (after their retries, if any).", ["task"], registry=r)
        self.task_retries = Counter(
            "runcast_task_retries", "Celery task retries (e.g. the database was unreachable).", ["task"], registry=r)
        self.sse_viewers = Gauge(
            "runcast_sse_viewers", "Open live streams (/runs/{id}/stream) of the API processes.",
            multiprocess_mode="livesum", registry=r)
        self.alert_deliveries = Counter(
            "runcast_alert_deliveries", "Alert delivery attempts, by channel and outcome "
            "(sent, retry, failed, dropped).", ["channel", "outcome"], registry=r)
        self.alert_check_errors = Counter(
            "runcast_alert_check_errors", "Runs the periodic alert check could not check, by check (stall, "
            "restart_loop, command_expiry); each is logged with its run id, and the other runs are checked.", ["check"], registry=r)
        self.http_latency = Histogram(
            "runcast_http_request_duration_seconds",
            "Seconds from a request's arrival to its response headers, by route template and status.",
            ["method", "route", "status"], buckets=HTTP_BUCKETS, registry=r)

    def accepted(self, events: Sequence[dict[str, Any]]) -> int:
        """Count an accepted batch; returns its points (for the caller's log line)."""
        points = count_points(events)
        self.batches_accepted.inc()
        self.events_accepted.inc(len(events))
        self.points_accepted.inc(points)
        return points

