"""Accepting a batch: the write door (``accept_batch``: checked in full, then committed to the
inbox before the API answers 202; ``POST /ingest`` and completed checkpoint uploads), the inbox
insert, adopting a broker message of the first task contract (its events in the message), and
recording a broker message that no task could read."""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Callable, Sequence
from typing import Any, NamedTuple

from kombu.exceptions import OperationalError as BrokerError
from runcast.wire.columns import event_count
from runcast.wire.events import EventError, validate_batch
from sqlalchemy import insert
from sqlalchemy.orm import Session

from runcast_server.commands import acks
from runcast_server.commands.service import deliver
from runcast_server.core.db import Database
from runcast_server.core.disk import check_room
from runcast_server.core.errors import ApiError
from runcast_server.core.settings import Settings
from runcast_server.inbox.rows import INBOX, MAX_ERROR_CHARS, PENDING, QUARANTINED, describe, parse_body
from runcast_server.ingest.checks import check_batch, register_runs
from runcast_server.ingest.results import IngestRejected
from runcast_server.observability.prometheus import Metrics

log = logging.getLogger(__name__)


def add(session: Session, project_id: int | None, body: bytes | None, events: int, received_at: float,
        *, next_sweep_at: float | None, state: str = PENDING, error: str | None = None,
        runs: Sequence[str] = ()) -> int:
    """Insert a batch into the inbox in the caller's transaction; returns its id.

    The API commits it before answering 202; from then on the batch survives any restart.
    ``next_sweep_at``: when the sweeper enqueues it again if it is still not stored.
    ``runs``: the runs its events belong to (a batch of one run is detected in its run's order).
    """
    run_ids = set(runs)
    return session.execute(
        insert(INBOX)
        .values(project_id=project_id, run_id=run_ids.pop() if len(run_ids) == 1 else None, state=state, body=body,
                events=events, received_at=received_at, next_sweep_at=next_sweep_at, sweeps=0, attempts=0,
                error=error)
        .returning(INBOX.c.id)
    ).scalar_one()


def _parse(body: bytes) -> Any:
    try:
        return parse_body(body)
    except (ValueError, UnicodeDecodeError) as exc:
        raise ApiError(400, f"body is not valid JSON: {exc}", field="body") from exc
    except RecursionError:
        raise ApiError(400, "body is nested too deeply to be a batch", field="body") from None


class Accepted(NamedTuple):
    """An accepted batch: how many events it holds, and the commands waiting for its runs (docs/commands.md)."""

    events: int
    commands: list[dict[str, Any]]
    acked: list[tuple[str, str]]  # (run, command) of each acknowledgement the batch recorded


def accept_batch(settings: Settings, session: Session, project_id: int, body: bytes, received_at: float,
                 metrics: Metrics, enqueue: Callable[[int, list[dict[str, Any]]], None]) -> Accepted:
    """The write door: parse and check the batch, register new runs, commit it to the inbox, then
    ``enqueue(inbox_id, events)`` (the ingest task); returns the event count and the commands to
    deliver. Every error is an ``ApiError`` naming the field, and nothing is written before every
    check passed (command acknowledgements included: ``commands.acks``).

    Refused first, with ``DiskFull`` (503), while the database's disk is below ``RUNCAST_MIN_FREE_BYTES``."""
    check_room(settings)
    try:
        events = validate_batch(_parse(body))
    except EventError as exc:
        raise ApiError(422, exc.message, field=exc.field, index=exc.index) from exc
    try:
        waiting = check_batch(session, project_id, events)
    except IngestRejected as exc:
        raise ApiError(exc.status, exc.message, field=exc.field, index=exc.index) from exc
    acked = acks.check(session, events, received_at)
    register_runs(session, project_id, events, received_at=received_at)
    acks.apply(session, events, acked, received_at)
    commands = deliver(session, waiting, received_at)
    count = event_count(events)  # a columnar event's rows counted: what the SDK counts as sent
    runs = sorted({e["run"] for e in events})
    inbox_id = add(session, project_id, body, count, received_at,
                   next_sweep_at=received_at + settings.inbox_redeliver_after_s, runs=runs)
    session.commit()  # durable from here on; visible to the task and to the next batch's checks
    points = metrics.accepted(events)
    log.info("ingest: accepted inbox %d: %d events, %d points", inbox_id, count, points,
             extra={"run_id": runs[0] if len(runs) == 1 else None, "run_ids": runs, "inbox_id": inbox_id})
    try:
        enqueue(inbox_id, events)
    except BrokerError as exc:
        log.warning("ingest: broker unreachable (%s); inbox %d waits for the sweeper", exc, inbox_id)
    except Exception:  # embedded: the task ran here and failed; the timer sweeps the row again
        log.exception("ingest: inbox %d could not be stored now; the sweeper will retry", inbox_id)
    return Accepted(count, commands, sorted({(e["run"], e["command"]) for e in events if e["type"] == "command_ack"}))


def adopt_legacy(db: Database, events: Sequence[Any], project_id: int | None, token: str | None, received_at: float | None,
                 *, redeliver_after: float) -> int | None:
    """Put the batch of a contract-1 message (events in the message) into the inbox.

    Such messages come from an API or an SDK of the previous release still queued in
    the broker during an upgrade. Returns the new row's id, or None when its token is
    invalid: then the row is quarantined at once (visible to an operator, never lost
    silently).
    """
    from runcast.wire.events import dumps_batch

    from runcast_server.core.auth import project_for_token

    now = time.time()
    error: str | None
    try:
        body = dumps_batch(list(events))
    except Exception as exc:  # noqa: BLE001 - whatever the message held, it must end visible, not lost
        body, error = json.dumps({"unreadable": repr(events)[:10_000]}).encode(), f"unreadable batch: {describe(exc)}"
    else:
        error = None
    with db.scope() as session:
        if project_id is None:
            project = project_for_token(session, token)
            project_id = project.id if project is not None else None
            if project is None:
                error = "invalid or revoked token in a broker message of the previous task contract"
        state = QUARANTINED if error else PENDING
        inbox_id = add(session, project_id, body, len(events), received_at or now, state=state, error=error,
                       next_sweep_at=None if error else now + redeliver_after)
    if error:
        log.error("ingest: quarantined a legacy broker message (inbox %d): %s", inbox_id, error)
        return None
    return inbox_id


def quarantine_unreadable(db: Database, message_id: str, task: str, reason: str, excerpt: str) -> int:
    """Record a broker message that no task could read as a quarantined row; returns its id.

    The row has no project, no events and no body (there is nothing to retry): its ``error``
    names the message, says why it was refused and quotes its first bytes.
    """
    error = f"unreadable broker message {message_id} of {task}: {reason}; it begins: {excerpt!r}"
    # What the database's text holds: lone surrogates and NUL escaped.
    error = error.encode("utf-8", "backslashreplace").decode("utf-8").replace("\x00", "\\x00")
    with db.scope() as session:
        inbox_id = add(session, None, None, 0, time.time(), state=QUARANTINED, error=error[:MAX_ERROR_CHARS],
                       next_sweep_at=None)
    log.error("ingest: quarantined unreadable broker message %s of %s (inbox %d): %s", message_id, task, inbox_id,
              reason, extra={"inbox_id": inbox_id, "message_id": message_id})
    return inbox_id
