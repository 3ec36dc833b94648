"""The inbox's life cycle: accept a batch, store it, run its detectors, quarantine what fails.

A batch goes ``pending`` (committed by the API before it answers 202) -> ``stored`` (its
points and events committed by ``store_batch``) -> ``done`` (the detectors ran, in a
transaction of their own; the body is cleared). Each step is one transaction that
starts by claiming the row (``SELECT ... FOR UPDATE SKIP LOCKED`` on PostgreSQL,
SQLite's write lock) and moving its state on, so a duplicate message (a redelivery, a
re-enqueue by the sweeper while a slow worker still runs) finds the row locked or
already moved and does nothing; and storage is idempotent anyway. The detectors take the
rows of a run in the order the API accepted them, whichever worker stored which first (``_detect``).

Failures: a database that cannot be reached leaves the row where it was and asks the
caller to retry (the task backs off; the sweeper re-enqueues what was lost). A batch
that fails for a reason no retry fixes (an event the schema refuses, another project's
run, a value the database cannot hold) is salvaged (``inbox.salvage``): its events are stored in halves,
each in its own transaction, until the events that fail are isolated; those are listed
in ``bad_events`` and the row is ``quarantined`` with its body kept, for an operator
(``runcast quarantine``, ``/api/v1/admin/inbox``). A detector that raises is logged and
recorded in ``detector_error``; the stored data stays.

The batch's points are committed asynchronously on PostgreSQL (``synchronous_commit``
off for these transactions only): the inbox row, committed durably by the API, is the
record, and a commit lost in a database crash leaves the row pending, to be stored again.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass
from typing import Any, Final

from runcast.wire.events import validate_batch
from sqlalchemy import Connection, bindparam, select, update

from runcast_server.alerts.engine import detect_batch
from runcast_server.core.db import Database
from runcast_server.inbox.models import WAITING
from runcast_server.inbox.rows import (
    BUSY_RETRY_S,
    DONE,
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
from runcast_server.inbox.salvage import salvage
from runcast_server.ingest.checks import take_write_lock
from runcast_server.ingest.results import IngestResult, UnknownRun
from runcast_server.ingest.store import store_batch
from runcast_server.ingest.tables import RUNS

UNKNOWN_RUN_RETRIES: Final = 12  # a legacy broker message that overtook its run_started
UNKNOWN_RUN_RETRY_S: Final = 5.0

log = logging.getLogger(__name__)


def backoff(attempt: int, cap: float) -> float:
    """Seconds before retry ``attempt`` (0-based) while the database is unavailable."""
    return min(cap, 1.0 * 2 ** min(attempt, 16))


def decode(body: bytes) -> list[dict[str, Any]]:
    """A stored body's events, validated (``EventError`` when the schema refuses one)."""
    return validate_batch(parse_body(body))


def _done_values(now: float, retention: float, detector_error: str | None = None) -> dict[str, Any]:
    return {"state": DONE, "body": None, "done_at": now, "next_sweep_at": now + retention,
            "detector_error": detector_error}


@dataclass(frozen=True)
class Policy:
    """The settings ``process`` needs (from ``Settings``)."""

    retention_s: float
    retry_max_s: float


def process(db: Database, inbox_id: int, policy: Policy, publish: Publish, *, attempt: int = 0,
            events: list[dict[str, Any]] | None = None) -> Outcome:
    """Store the batch of inbox row ``inbox_id`` of ``db``, then run its detectors; see the module docstring.

    ``publish`` is called with each committed result (live messages, notifications).
    ``attempt`` counts the caller's earlier tries (for the back-off). ``events``: the
    row's body already decoded and validated (``decode``) by the caller, which saves
    doing it again; None: read it from the row.
    """
    try:
        outcome, events, segments = _store(db, inbox_id, attempt, publish, events)
    except Exception as exc:
        if not is_transient(exc):
            raise
        log.warning("ingest: inbox %d: database unavailable (%s); retrying", inbox_id, describe(exc))
        return Outcome(state=PENDING, retry_in=backoff(attempt, policy.retry_max_s))
    if outcome.state == QUARANTINED:
        _detect_behind(db, inbox_id, policy, publish)
    if outcome.state != STORED:
        return outcome
    try:
        if _detect(db, inbox_id, policy, events, segments, publish):
            outcome.state = DONE
    except Exception as exc:
        if not is_transient(exc):
            raise
        log.warning("ingest: inbox %d: database unavailable for the detectors (%s); retrying", inbox_id, describe(exc))
        outcome.retry_in = backoff(attempt, policy.retry_max_s)
    return outcome


def _store(db: Database, inbox_id: int, attempt: int, publish: Publish, given: list[dict[str, Any]] | None
           ) -> tuple[Outcome, list[dict[str, Any]] | None, dict[Any, int] | None]:
    """Phase one: claim a pending row, store its batch, mark it stored; one transaction.

    ``given``: the row's events, decoded by the caller (the body is then not read back).
    Returns the outcome, and the validated events and segment ids when it stored them.
    """
    try:
        with db.scope() as session:
            conn = session.connection()
            row = claim(conn, inbox_id, PENDING, read_body=given is None, state=STORED)
            if row is None:
                state = read_state(conn, inbox_id)
                if state == PENDING:  # someone else holds it: a duplicate message, or the sweeper
                    return Outcome(state=PENDING, retry_in=max(BUSY_RETRY_S, backoff(attempt, 60.0))), None, None
                return Outcome(state=state), None, None
            try:
                events = decode(row.body) if given is None else given
                result = store_batch(session, row.project_id, events, received_at=row.received_at)
            except Exception as exc:
                if is_transient(exc):
                    raise
                raise _Failed(exc) from exc  # rolls the transaction back, claim included
    except _Failed as failed:
        if isinstance(failed.cause, UnknownRun) and attempt < UNKNOWN_RUN_RETRIES:
            log.warning("ingest: inbox %d: %s; retrying in %.0f s", inbox_id, failed.cause, UNKNOWN_RUN_RETRY_S)
            return Outcome(state=PENDING, retry_in=UNKNOWN_RUN_RETRY_S), None, None
        return salvage(db, inbox_id, failed.cause, publish), None, None
    lag = time.time() - row.received_at
    publish(result)
    outcome = Outcome(state=STORED, points=result.points_inserted,
                      events=result.events_inserted + result.outputs_inserted, lag_s=lag, run_ids=sorted(result.runs))
    return outcome, events, result.segments


class _Failed(Exception):
    """Carries a failure that no retry fixes out of the transaction it aborted."""

    def __init__(self, cause: BaseException) -> None:
        super().__init__(str(cause))
        self.cause = cause


def _detect(db: Database, inbox_id: int, policy: Policy, events: list[dict[str, Any]] | None,
            segments: dict[Any, int] | None, publish: Publish) -> bool:
    """Phase two: the detectors on the stored row, each row in a transaction of its own; True once
    the row is done.

    The detectors read a run's points in the order its batches were accepted: a point at or
    below a step they have seen is not looked at again. So the rows of one run (``run_id``) are
    taken in id order, whichever worker stored which first: under the run's lock, the first row
    of the run still on its way is detected if it is stored, and so on, until a row that is not
    stored yet (pending, or held by someone): the worker that stores it takes the rows behind it
    on. A row of several runs, or of before migration 0026, is detected alone. Each result is
    published once committed. A detector that raises costs nothing but its alerts: it is logged,
    the row is marked done with ``detector_error``.
    """
    run_id: str | None = None
    first = True
    while True:
        now = time.time()
        row_id = inbox_id
        try:
            with db.scope() as session:
                conn = session.connection()
                if first:
                    run_id = conn.execute(_RUN_OF_ROW, {"row": inbox_id}).scalar()
                    first = False
                if run_id is not None:
                    _lock_run(conn, run_id)
                    head = _next_stored(conn, run_id)
                    if head is None:
                        return read_state(conn, inbox_id) == DONE
                    row_id = head
                own = row_id == inbox_id
                detected = _detect_row(conn, row_id, now, policy, events if own else None, segments if own else None)
                if detected is None:  # someone else holds the row: the rows behind it are theirs to take
                    return read_state(conn, inbox_id) == DONE
                more = run_id is not None and _next_stored(conn, run_id) is not None  # still under the lock
                done = not more and read_state(conn, inbox_id) == DONE
        except Exception as exc:
            if is_transient(exc):
                raise
            log.exception("ingest: inbox %d: the detectors failed; the batch is stored, its alerts are lost", row_id)
            with db.scope() as session:
                if claim(session.connection(), row_id, STORED,
                         **_done_values(now, policy.retention_s, detector_error=describe(exc))) is None:
                    return False
            if run_id is None:
                return True
            continue
        publish(detected)
        if not more:
            return done


def _detect_behind(db: Database, inbox_id: int, policy: Policy, publish: Publish) -> None:
    """The stored rows of the run that waited behind a row just quarantined (else the sweeper takes them)."""
    try:
        _detect(db, inbox_id, policy, None, None, publish)
    except Exception as exc:
        if not is_transient(exc):
            raise
        log.warning("ingest: inbox %d: database unavailable for the rows behind it (%s)", inbox_id, describe(exc))


# Built once: they run for every batch, and building a statement costs more than running it here.
_RUN_OF_ROW: Final = select(INBOX.c.run_id).where(INBOX.c.id == bindparam("row"))
_FIRST_WAITING: Final = (select(INBOX.c.id, INBOX.c.state).where(INBOX.c.run_id == bindparam("run"), WAITING)
                         .order_by(INBOX.c.id).limit(1))
_LOCK_RUN: Final = select(RUNS.c.id).where(RUNS.c.id == bindparam("run")).with_for_update()


def _lock_run(conn: Connection, run_id: str) -> None:
    """The run's lock, which ingest and the detectors take too (``ingest.checks.lock_runs``; SQLite's write lock)."""
    if conn.dialect.name == "sqlite":
        take_write_lock(conn)
    else:
        conn.execute(_LOCK_RUN, {"run": run_id})


def _next_stored(conn: Connection, run_id: str) -> int | None:
    """Under the run's lock: the run's first row still on its way, if it is stored (else None)."""
    head = conn.execute(_FIRST_WAITING, {"run": run_id}).first()
    return head.id if head is not None and head.state == STORED else None


def _detect_row(conn: Connection, inbox_id: int, now: float, policy: Policy, events: list[dict[str, Any]] | None,
                segments: dict[Any, int] | None) -> IngestResult | None:
    """Claim the stored row, run the detectors on its batch and mark it done; None when someone else holds it.

    ``events``: the batch as validated by the caller (else read from the row); ``segments``
    its segment ids, when known.
    """
    if events is None:  # a redelivery, the sweeper, or a row behind this one: read the batch back
        row = claim(conn, inbox_id, STORED)
        if row is None:
            return None
        events = decode(row.body)
        conn.execute(update(INBOX).where(INBOX.c.id == inbox_id).values(**_done_values(now, policy.retention_s)))
    elif claim(conn, inbox_id, STORED, **_done_values(now, policy.retention_s)) is None:
        return None
    return detect_batch(conn, events, now, segments)
