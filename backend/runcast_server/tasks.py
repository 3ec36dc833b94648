"""Celery tasks. ``runcast.ingest_batch`` stores one batch of wire events.

The task is safe to run twice: ``store_batch`` writes every row under its natural
key, and a worker killed mid-batch rolls its transaction back, so the redelivered
message (``acks_late``) stores each point exactly once.
"""

from __future__ import annotations

import logging
import time
from typing import Any, Final

from celery import Task
from sqlalchemy.exc import OperationalError

from runcast.events import EventError, validate_event
from runcast_server import hub
from runcast_server.auth import project_for_token
from runcast_server.celery_app import app, get_app
from runcast_server.db import session_scope
from runcast_server.ingest import ForeignRun, IngestResult, UnknownRun, store_batch
from runcast_server.settings import get_settings

INGEST_TASK: Final = "runcast.ingest_batch"
UNKNOWN_RUN_RETRIES: Final = 12
UNKNOWN_RUN_COUNTDOWN_S: Final = 5.0

log = logging.getLogger(__name__)


@app.task(
    name=INGEST_TASK,
    bind=True,
    acks_late=True,
    autoretry_for=(OperationalError,),
    retry_backoff=1,
    retry_backoff_max=60,
    retry_jitter=True,
    max_retries=20,
)
def ingest_batch(
    self: Task,
    events: list[dict[str, Any]],
    project_id: int | None = None,
    token: str | None = None,
    received_at: float | None = None,
) -> dict[str, int]:
    """Store ``events`` for ``project_id`` (or the project of ``token``) and publish live messages.

    Invalid events, bad tokens and runs of other projects are logged and dropped: a
    retry cannot fix them. An event for a run not registered yet (a batch that
    overtook its run_started) is retried with a countdown.
    """
    try:
        validated = [validate_event(e) for e in events]
    except EventError as exc:
        log.error("ingest: dropping invalid batch of %d events: %s", len(events), exc)
        return {"dropped": len(events)}
    try:
        with session_scope() as session:
            if project_id is None:
                project = project_for_token(session, token)
                if project is None:
                    log.error("ingest: dropping batch of %d events: invalid or revoked token", len(events))
                    return {"dropped": len(events)}
                project_id = project.id
            result = store_batch(session, project_id, validated, received_at=received_at or time.time())
    except ForeignRun as exc:
        log.error("ingest: dropping batch of %d events: event %d: %s", len(events), exc.index, exc.message)
        return {"dropped": len(events)}
    except UnknownRun as exc:
        if any(e["type"] == "run_started" for e in validated) or self.request.retries >= UNKNOWN_RUN_RETRIES:
            log.error("ingest: dropping batch of %d events: event %d: %s", len(events), exc.index, exc.message)
            return {"dropped": len(events)}
        raise self.retry(exc=exc, countdown=UNKNOWN_RUN_COUNTDOWN_S, max_retries=UNKNOWN_RUN_RETRIES)
    publish_result(result)
    after_commit_alerts(result)
    return {"points": result.points_inserted, "events": result.events_inserted}


def publish_result(result: IngestResult) -> None:
    """One live message per changed run, after the commit; a hub failure never fails the batch."""
    for run_id, message in result.messages():
        try:
            hub.publish(run_id, message)
        except Exception:  # noqa: BLE001 - live messages are best effort; the data is stored
            log.warning("ingest: could not publish to run:%s", run_id, exc_info=True)


def after_commit_alerts(result: IngestResult) -> None:
    """Hand the batch's alerts to notifications (alerts.notify); embedded: start the stall timer."""
    try:
        from runcast_server.alerts import notify, stall

        if get_settings().embedded:
            stall.ensure_timer()
        notify.dispatch(result.alerts)
    except Exception:  # noqa: BLE001 - notifications never fail a stored batch
        log.warning("ingest: could not dispatch alerts", exc_info=True)


def enqueue_ingest(events: list[dict[str, Any]], project_id: int, *, received_at: float | None = None) -> None:
    """Send a validated-then-wire-encoded batch to the ingest task (runs now when embedded)."""
    settings = get_settings()
    get_app()  # follow settings changes (tests swap them)
    ingest_batch.apply_async(
        kwargs={"events": events, "project_id": project_id, "token": None, "received_at": received_at},
        expires=settings.ingest_task_expires_s,
    )
