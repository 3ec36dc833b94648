"""Salvaging a batch that failed as a whole: store what can be stored, quarantine the row."""

from __future__ import annotations

import logging
import time
from typing import Any

from runcast.wire.events import validate_event
from sqlalchemy import select

from runcast_server.alerts.engine import detect_batch
from runcast_server.core.db import Database
from runcast_server.inbox.rows import (
    BUSY_RETRY_S,
    INBOX,
    PENDING,
    QUARANTINED,
    STORED,
    Outcome,
    Publish,
    claim,
    describe,
    is_transient,
    parse_body,
    read_state,
)
from runcast_server.ingest.store import store_batch

log = logging.getLogger(__name__)


class _Busy(Exception):
    """Another worker holds the row."""


def salvage(db: Database, inbox_id: int, failure: BaseException, publish: Publish) -> Outcome:
    """Store what can be stored of a batch that failed as a whole, then quarantine the row.

    The batch's events are validated one by one, and the valid ones stored in halves,
    each part in its own transaction that first claims the (still pending) row, so two
    workers never salvage one batch at once, until every event that fails is alone.
    Returns ``stored`` (nothing failed after all: the detectors run next), ``quarantined``,
    or ``pending`` with ``retry_in`` when the database went away or another worker holds
    the row (what was stored stays: storage is idempotent).
    """
    with db.scope() as session:
        row = session.execute(select(INBOX.c.project_id, INBOX.c.body).where(INBOX.c.id == inbox_id)).first()
    if row is None:
        return Outcome(state=None)
    bad: list[dict[str, Any]] = []
    good: list[tuple[int, dict[str, Any]]] = []
    try:
        raw = parse_body(row.body)["events"]
        for index, event in enumerate(raw):
            try:
                good.append((index, validate_event(event)))
            except Exception as exc:  # noqa: BLE001 - whatever a hostile event makes validation raise
                bad.append({"index": index, "error": describe(exc)})
    except Exception as exc:  # noqa: BLE001 - the body itself is unusable
        good, bad = [], [{"index": None, "error": describe(exc)}]
    outcome = Outcome(state=QUARANTINED)
    try:
        _store_parts(db, inbox_id, row.project_id, good, bad, outcome)
    except _Busy:
        return Outcome(state=PENDING, retry_in=BUSY_RETRY_S)
    except Exception as exc:
        if not is_transient(exc):
            raise
        return Outcome(state=PENDING, retry_in=BUSY_RETRY_S)
    for result in outcome.results:
        publish(result)
    if not bad:
        with db.scope() as session:
            claimed = claim(session.connection(), inbox_id, PENDING, state=STORED)
        outcome.state = STORED if claimed is not None else _state_of(db, inbox_id)
        return outcome
    error = describe(failure)
    with db.scope() as session:
        claimed = claim(session.connection(), inbox_id, PENDING, state=QUARANTINED, error=error,
                         bad_events=bad, next_sweep_at=None)
    if claimed is None:
        return Outcome(state=_state_of(db, inbox_id))
    failed = {b["index"] for b in bad}
    stored = [e for i, e in good if i not in failed]
    log.error("ingest: inbox %d quarantined: %d of its events stored, %d not (first: %s); "
              "see `runcast quarantine show %d`", inbox_id, len(stored), len(bad), bad[0]["error"], inbox_id)
    if stored:
        _detect_salvaged(db, inbox_id, stored, publish)
    return outcome


def _store_parts(db: Database, inbox_id: int, project_id: int | None, good: list[tuple[int, dict[str, Any]]],
                 bad: list[dict[str, Any]], outcome: Outcome) -> None:
    """Store ``good`` in halves until each failing event is alone; failing ones go to ``bad``."""
    if project_id is None:  # a legacy message whose token matched no project: nothing can be stored
        bad[:] = [{"index": None, "error": "no project: the message's token is invalid or revoked"}]
        return
    pending: list[list[tuple[int, dict[str, Any]]]] = [good] if good else []
    while pending:
        part = pending.pop(0)
        try:
            with db.scope() as session:
                if claim(session.connection(), inbox_id, PENDING) is None:
                    raise _Busy
                result = store_batch(session, project_id, [e for _, e in part])
        except _Busy:
            raise
        except Exception as exc:
            if is_transient(exc):
                raise
            if len(part) == 1:
                bad.append({"index": part[0][0], "error": describe(exc)})
            else:
                half = len(part) // 2
                pending[:0] = [part[:half], part[half:]]
            continue
        outcome.points += result.points_inserted
        outcome.events += result.events_inserted + result.outputs_inserted
        outcome.results.append(result)
    bad.sort(key=lambda b: -1 if b["index"] is None else b["index"])


def _detect_salvaged(db: Database, inbox_id: int, events: list[dict[str, Any]], publish: Publish) -> None:
    """The detectors on the stored part of a quarantined batch (best effort: logged on failure)."""
    try:
        with db.scope() as session:
            result = detect_batch(session.connection(), events, time.time())
    except Exception:
        log.exception("ingest: inbox %d: the detectors failed on the stored part of a quarantined batch", inbox_id)
        return
    publish(result)


def _state_of(db: Database, inbox_id: int) -> str | None:
    with db.scope() as session:
        return read_state(session.connection(), inbox_id)
