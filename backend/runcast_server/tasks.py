"""Celery tasks of the write path: ``runcast.ingest_batch``, ``runcast.inbox.sweep`` and
``runcast.inbox.quarantine``.

The ingest task's message is ``{"contract": 2, "inbox_id": <id>}``: the batch itself is
in the inbox table, committed by the API before it answered 202 (``inbox.accept``).
A message of the first contract (the events themselves, from an API or SDK of the
previous release still queued in the broker during an upgrade) is put into the inbox
and handled the same way; a message of any other contract is refused with an error in
the log, and its batch, still in the inbox, is enqueued again by the sweeper of a
worker that speaks it. A message that is none of these (``inbox.messages``), and one
the worker's main process refused before decoding it (``core.screened_task``, which sends
``runcast.inbox.quarantine``), becomes a quarantined inbox row. Details: docs/CONTRACTS.md.
"""

from __future__ import annotations

import json
import logging
import time
from typing import Any, Final

from celery import Celery, Task, current_app, shared_task
from celery.signals import after_setup_logger, after_setup_task_logger, task_failure, task_retry, worker_init

from runcast_server.alerts import tasks as alert_tasks  # noqa: F401  (registers the alerts' tasks where this module is)
from runcast_server.context import AppContext, context_of
from runcast_server.core.celery_app import RuncastCelery
from runcast_server.core.message_checks import Unreadable
from runcast_server.core.screened_task import QUARANTINE_TASK
from runcast_server.core.settings import Settings
from runcast_server.inbox import messages
from runcast_server.inbox import sweep as inbox_sweep
from runcast_server.inbox.accept import adopt_legacy, quarantine_unreadable
from runcast_server.inbox.messages import CONTRACT
from runcast_server.inbox.process import Policy, backoff, process
from runcast_server.inbox.rows import QUARANTINED, Outcome, is_transient
from runcast_server.ingest.results import IngestResult
from runcast_server.observability.logs import run_scope, use_json
from runcast_server.observability.prometheus import Metrics
from runcast_server.reports import tasks as report_tasks  # noqa: F401  (and the report notices')

INGEST_TASK: Final = "runcast.ingest_batch"
SWEEP_TASK: Final = "runcast.inbox.sweep"
EXCERPT_CHARS: Final = 300

log = logging.getLogger(__name__)


def policy(settings: Settings) -> Policy:
    return Policy(retention_s=settings.inbox_retention_s, retry_max_s=settings.ingest_retry_max_s)


# reject_on_worker_lost off: a message whose pool process dies (killed, out of memory) is
# acknowledged, not kept to come back and kill again; its batch waits in the inbox for the sweeper.
@shared_task(name=INGEST_TASK, bind=True, acks_late=True, reject_on_worker_lost=False)
def ingest_batch(self: Task, **message: Any) -> dict[str, Any]:
    """Store the inbox batch the message names, then run its detectors (``inbox.process.process``).

    While the database is unavailable the task retries with a capped back-off, for as
    long as it takes (the sweeper also re-enqueues what a lost message leaves behind).
    """
    ctx = context_of(self.app)
    inbox_id = _inbox_id(message, ctx, str(self.request.id))
    if inbox_id is None:
        return {"state": None}
    outcome = store_row(ctx, inbox_id, attempt=self.request.retries)
    if outcome.retry_in is not None and not self.request.is_eager:
        raise self.retry(countdown=outcome.retry_in, max_retries=None)
    return outcome.summary()


def store_row(ctx: AppContext, inbox_id: int, *, attempt: int = 0,
              events: list[dict[str, Any]] | None = None) -> Outcome:
    """Process one inbox row (``inbox.process.process``) and record its metrics and log line."""
    outcome = process(ctx.database, inbox_id, policy(ctx.settings), lambda result: publish(ctx, result), attempt=attempt,
                      events=events)
    _observe(ctx, inbox_id, outcome)
    return outcome


def _observe(ctx: AppContext, inbox_id: int, outcome: Outcome) -> None:
    """The batch's metrics and its log line (with the run id, when one run)."""
    metrics = ctx.metrics
    if metrics is not None:
        if outcome.lag_s is not None:
            metrics.lag.observe(outcome.lag_s)
        metrics.points_stored.inc(outcome.points)
        if outcome.state == QUARANTINED:
            metrics.quarantined.inc()
    runs = outcome.run_ids or sorted({rid for r in outcome.results for rid in r.runs})
    with run_scope(runs[0] if len(runs) == 1 else None):
        log.info("ingest: inbox %d, state %s: %d points, %d events stored%s", inbox_id, outcome.state, outcome.points,
                 outcome.events, "" if outcome.lag_s is None else f", {outcome.lag_s:.3f} s after acceptance",
                 extra={"inbox_id": inbox_id, "run_ids": runs})


# --- a worker's start, and its signals ----------------------------------------------------------


@worker_init.connect
def _worker_start(sender: Any = None, **_: Any) -> None:
    """A worker builds its instruments and its application context once at start, on its own Celery
    app (before the pool forks; prometheus-client follows the fork in multiprocess mode, and the
    context opens no connection before its first use), as the API's app factory does for its app.
    The settings are the ones the app was made from (``runcast worker``: its command's; a bare
    ``celery -A ... worker``: the environment's)."""
    celery = getattr(sender, "app", None)
    if isinstance(celery, RuncastCelery) and celery.context is None:
        AppContext.build(celery.settings, metrics=Metrics(), celery=celery).start()


@after_setup_logger.connect
@after_setup_task_logger.connect
def _log_format(logger: logging.Logger | None = None, **_: Any) -> None:
    """RUNCAST_LOG_FORMAT=json: the worker's log lines as JSON objects too. Celery sets up a worker's
    logging with that worker's app as its current one."""
    settings = getattr(current_app, "settings", None)
    if logger is not None and settings is not None and settings.log_format == "json":
        use_json(logger)


def _metrics_of(celery: Celery) -> Metrics | None:
    ctx = getattr(celery, "context", None)
    return ctx.metrics if isinstance(ctx, AppContext) else None


@task_failure.connect
def _task_failed(sender: Any = None, **_: Any) -> None:
    metrics = _metrics_of(sender.app) if sender is not None else None
    if metrics is not None:
        metrics.task_failures.labels(sender.name).inc()


@task_retry.connect
def _task_retried(sender: Any = None, **_: Any) -> None:
    metrics = _metrics_of(sender.app) if sender is not None else None
    if metrics is not None:
        metrics.task_retries.labels(sender.name).inc()


def _inbox_id(message: dict[str, Any], ctx: AppContext, message_id: str) -> int | None:
    """The inbox row a message is about (contract 1 messages are put into the inbox first;
    an unreadable one is quarantined)."""
    try:
        read = messages.read(message)
    except Unreadable as exc:
        excerpt = json.dumps(message, default=repr)[:EXCERPT_CHARS]
        record_unreadable(ctx, message_id, INGEST_TASK, str(exc), excerpt)
        return None
    if isinstance(read, messages.Current):
        return read.inbox_id
    if isinstance(read, messages.Legacy):
        return adopt_legacy(ctx.database, read.events, read.project_id, read.token, read.received_at,
                            redeliver_after=ctx.settings.inbox_redeliver_after_s)
    log.error(
        "ingest: refused a %s message of contract %r (this worker speaks %d): upgrade the worker; "
        "the batch stays in the inbox and is enqueued again by the sweeper",
        INGEST_TASK, read.contract, CONTRACT,
    )
    return None


@shared_task(name=QUARANTINE_TASK, bind=True, acks_late=True)
def quarantine_message(self: Task, message_id: str, task: str, reason: str, excerpt: str) -> dict[str, Any]:
    """Record a message the worker's main process refused (``core.screened_task``) as a quarantined
    inbox row; retries while the database is unavailable."""
    ctx = context_of(self.app)
    try:
        inbox_id = record_unreadable(ctx, str(message_id), str(task), str(reason), str(excerpt))
    except Exception as exc:
        if not is_transient(exc) or self.request.is_eager:
            raise
        raise self.retry(countdown=backoff(self.request.retries, ctx.settings.ingest_retry_max_s),
                         max_retries=None) from None
    return {"state": QUARANTINED, "inbox_id": inbox_id}


def record_unreadable(ctx: AppContext, message_id: str, task: str, reason: str, excerpt: str) -> int:
    """A quarantined inbox row for a broker message no task could read (``inbox.accept``), counted."""
    inbox_id = quarantine_unreadable(ctx.database, message_id, task, reason, excerpt)
    metrics = ctx.metrics
    if metrics is not None:
        metrics.quarantined.inc()
    return inbox_id


def publish(ctx: AppContext, result: IngestResult) -> None:
    """After a commit: live messages, then notifications of the alerts it opened or closed."""
    publish_result(ctx, result)
    after_commit_alerts(ctx, result)


def publish_result(ctx: AppContext, result: IngestResult) -> None:
    """One live message per changed run, after the commit; a hub failure never fails the batch."""
    for run_id, message in result.messages():
        try:
            ctx.hub.publish(run_id, message)
        except Exception:
            log.warning("ingest: could not publish to run:%s", run_id, exc_info=True)


def after_commit_alerts(ctx: AppContext, result: IngestResult) -> None:
    """Hand the batch's alerts to notifications (alerts.notify)."""
    try:
        from runcast_server.alerts import notify

        notify.dispatch(ctx, result.alerts)
    except Exception:
        log.warning("ingest: could not dispatch alerts", exc_info=True)


def enqueue_ingest(ctx: AppContext, inbox_id: int, events: list[dict[str, Any]] | None = None) -> None:
    """Send the ingest task for an inbox row (runs now, in this thread, when embedded).

    ``events``: the row's batch as the caller validated it from the very body it
    committed. Embedded, the batch is then stored from them at once, without decoding
    and validating the body a second time; a worker always reads the row.

    Raises kombu's OperationalError when the broker is down; the batch is safe in the
    inbox all the same, and the sweeper enqueues it once the broker is back.
    """
    settings = ctx.settings
    if settings.embedded and events is not None:
        store_row(ctx, inbox_id, events=events)
        return
    # The caller's Celery app: its broker; embedded, the eager task runs here, now, with ``ctx``.
    ctx.celery.tasks[INGEST_TASK].apply_async(
        kwargs={"contract": CONTRACT, "inbox_id": inbox_id}, expires=settings.ingest_task_expires_s
    )


@shared_task(name=SWEEP_TASK, bind=True, ignore_result=True)
def sweep_inbox(self: Task) -> dict[str, int]:
    """Periodic (Celery beat): re-enqueue inbox rows not stored in time, delete old done rows.

    A Redis ``SET NX EX`` lock makes an overlapping sweep skip its turn.
    """
    ctx = context_of(self.app)
    settings = ctx.settings
    if not _sweep_lock(settings):
        return {"skipped": 1}
    return inbox_sweep.sweep(ctx.database, time.time(), settings, lambda inbox_id: enqueue_ingest(ctx, inbox_id)).as_dict()


def _sweep_lock(settings: Settings) -> bool:
    import redis

    client = redis.Redis.from_url(settings.redis_url or "", socket_connect_timeout=2, socket_timeout=5)
    ttl = max(1, int(settings.inbox_sweep_interval_s))
    return bool(client.set("runcast:inbox:sweep", str(time.time()), nx=True, ex=ttl))
