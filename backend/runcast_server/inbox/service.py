"""The inbox's life cycle: accept a batch, store it, run its detectors, quarantine what fails.

A batch goes ``pending`` (committed by the API before it answers 202) -> ``stored`` (its
points and events committed by ``store_batch``) -> ``done`` (the detectors ran, in a
transaction of their own; the body is cleared). Each step is one transaction that
starts by claiming the row (``SELECT ... FOR UPDATE SKIP LOCKED`` on PostgreSQL,
SQLite's write lock) and moving its state on, so a duplicate message (a redelivery, a
re-enqueue by the sweeper while a slow worker still runs) finds the row locked or
already moved and does nothing; and storage is idempotent anyway.

Failures: a database that cannot be reached leaves the row where it was and asks the
caller to retry (the task backs off; the sweeper re-enqueues what was lost). A batch
that fails for a reason no retry fixes (an event the schema refuses, another project's
run, a value the database cannot hold) is salvaged: its events are stored in halves,
each in its own transaction, until the events that fail are isolated; those are listed
in ``bad_events`` and the row is ``quarantined`` with its body kept, for an operator
(``runcast quarantine``, ``/api/v1/admin/inbox``). A detector that raises is logged and
recorded in ``detector_error``; the stored data stays.

The batch's points are committed asynchronously on PostgreSQL (``synchronous_commit``
off for these transactions only): the inbox row, committed durably by the API, is the
record, and a commit lost in a database crash leaves the row pending, to be stored again.
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Final

from runcast.events import validate_batch, validate_event
from sqlalchemy import Connection, func, insert, select, update
from sqlalchemy.orm import Session

from runcast_server.core.db import session_scope
from runcast_server.detectors.hook import detect_batch
from runcast_server.inbox.models import InboxRow
from runcast_server.ingest.results import IngestResult, UnknownRun
from runcast_server.ingest.store import store_batch

INBOX: Final = InboxRow.__table__
PENDING: Final = "pending"
STORED: Final = "stored"
DONE: Final = "done"
QUARANTINED: Final = "quarantined"
STATES: Final = (PENDING, STORED, DONE, QUARANTINED)
MAX_SWEEP_BACKOFF_S: Final = 600.0
UNKNOWN_RUN_RETRIES: Final = 12  # a legacy broker message that overtook its run_started
UNKNOWN_RUN_RETRY_S: Final = 5.0
BUSY_RETRY_S: Final = 2.0
MAX_ERROR_CHARS: Final = 2000

log = logging.getLogger(__name__)

Publish = Callable[[IngestResult], None]


@dataclass
class Outcome:
    """What ``process`` did with one inbox row.

    ``state`` is the row's state afterwards (None: no such row). ``retry_in``: seconds
    after which the caller should call again (the database was unreachable, or another
    worker holds the row); None when nothing is left to do here. ``lag_s``: seconds from
    the batch's acceptance to this call's commit of its points (None: this call stored
    none); ``run_ids``: the runs this call changed.
    """

    state: str | None
    points: int = 0
    events: int = 0
    retry_in: float | None = None
    lag_s: float | None = None
    run_ids: list[str] = field(default_factory=list)
    results: list[IngestResult] = field(default_factory=list)

    def summary(self) -> dict[str, Any]:
        out: dict[str, Any] = {"state": self.state, "points": self.points, "events": self.events}
        if self.retry_in is not None:
            out["retry_in"] = self.retry_in
        return out


def is_transient(exc: BaseException) -> bool:
    """A database that is down, restarting, unreachable, or a deadlock: retrying may help."""
    from psycopg import InterfaceError as PgInterfaceError
    from psycopg import OperationalError as PgOperationalError
    from sqlalchemy import exc as sa

    if isinstance(exc, (sa.OperationalError, sa.InterfaceError, sa.DisconnectionError, sa.TimeoutError)):
        return True
    if isinstance(exc, sa.DBAPIError) and exc.connection_invalidated:
        return True
    # The bulk writers use psycopg's cursor directly: its errors arrive unwrapped.
    return isinstance(exc, (PgOperationalError, PgInterfaceError))


def backoff(attempt: int, cap: float) -> float:
    """Seconds before retry ``attempt`` (0-based) while the database is unavailable."""
    return min(cap, 1.0 * 2 ** min(attempt, 16))


# --- accepting ----------------------------------------------------------------------------


def add(session: Session, project_id: int | None, body: bytes, events: int, received_at: float,
        *, next_sweep_at: float | None, state: str = PENDING, error: str | None = None) -> int:
    """Insert a batch into the inbox in the caller's transaction; returns its id.

    The API commits it before answering 202; from then on the batch survives any restart.
    ``next_sweep_at``: when the sweeper enqueues it again if it is still not stored.
    """
    return session.execute(
        insert(INBOX)
        .values(project_id=project_id, state=state, body=body, events=events, received_at=received_at,
                next_sweep_at=next_sweep_at, sweeps=0, attempts=0, error=error)
        .returning(INBOX.c.id)
    ).scalar_one()


def decode(body: bytes) -> list[dict[str, Any]]:
    """A stored body's events, validated (``EventError`` when the schema refuses one)."""
    return validate_batch(json.loads(body, parse_constant=_not_json))


def _not_json(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")


# --- claiming a row -------------------------------------------------------------------------


def _claim(conn: Connection, inbox_id: int, expect: str, *, read_body: bool = True, **values: Any) -> Any:
    """Lock the row if it is in state ``expect`` and nobody else holds it, and set ``values``.

    Returns the row's (project_id, body, received_at) as they were (the body only with
    ``read_body`` and when ``values`` do not set it), or None. On
    PostgreSQL the transaction is also made to commit asynchronously (see the module
    docstring): ``set_config`` rides along in the same round trip.
    """
    claim = INBOX.alias("claim")
    locked = (
        select(claim.c.id)
        .where(claim.c.id == inbox_id, claim.c.state == expect)
        .with_for_update(skip_locked=True)
        .scalar_subquery()
    )
    if conn.dialect.name == "sqlite":
        from runcast_server.ingest.checks import take_write_lock

        take_write_lock(conn)
    columns = [INBOX.c.project_id, INBOX.c.received_at]
    if read_body and "body" not in values:
        columns.append(INBOX.c.body)
    if conn.dialect.name == "postgresql":
        columns.append(func.set_config("synchronous_commit", "off", True))
    stmt = update(INBOX).where(INBOX.c.id == locked).values(attempts=INBOX.c.attempts + 1, **values)
    return conn.execute(stmt.returning(*columns)).first()


def _state(conn: Connection, inbox_id: int) -> str | None:
    return conn.execute(select(INBOX.c.state).where(INBOX.c.id == inbox_id)).scalar()


def _done_values(now: float, retention: float, detector_error: str | None = None) -> dict[str, Any]:
    return {"state": DONE, "body": None, "done_at": now, "next_sweep_at": now + retention,
            "detector_error": detector_error}


# --- processing -------------------------------------------------------------------------------


@dataclass(frozen=True)
class Policy:
    """The settings ``process`` needs (from ``Settings``)."""

    retention_s: float
    retry_max_s: float


def process(inbox_id: int, policy: Policy, publish: Publish, *, attempt: int = 0,
            events: list[dict[str, Any]] | None = None) -> Outcome:
    """Store the batch of inbox row ``inbox_id``, then run its detectors; see the module docstring.

    ``publish`` is called with each committed result (live messages, notifications).
    ``attempt`` counts the caller's earlier tries (for the back-off). ``events``: the
    row's body already decoded and validated (``decode``) by the caller, which saves
    doing it again; None: read it from the row.
    """
    try:
        outcome, events, segments = _store(inbox_id, attempt, publish, events)
    except Exception as exc:
        if not is_transient(exc):
            raise
        log.warning("ingest: inbox %d: database unavailable (%s); retrying", inbox_id, _describe(exc))
        return Outcome(state=PENDING, retry_in=backoff(attempt, policy.retry_max_s))
    if outcome.state != STORED:
        return outcome
    try:
        detected = _detect(inbox_id, policy, events, segments)
    except Exception as exc:
        if not is_transient(exc):
            raise
        log.warning("ingest: inbox %d: database unavailable for the detectors (%s); retrying", inbox_id, _describe(exc))
        outcome.retry_in = backoff(attempt, policy.retry_max_s)
        return outcome
    if detected is not None:
        outcome.state = DONE
        publish(detected)
    return outcome


def _store(inbox_id: int, attempt: int, publish: Publish, given: list[dict[str, Any]] | None
           ) -> tuple[Outcome, list[dict[str, Any]] | None, dict[Any, int] | None]:
    """Phase one: claim a pending row, store its batch, mark it stored; one transaction.

    ``given``: the row's events, decoded by the caller (the body is then not read back).
    Returns the outcome, and the validated events and segment ids when it stored them.
    """
    try:
        with session_scope() as session:
            conn = session.connection()
            row = _claim(conn, inbox_id, PENDING, read_body=given is None, state=STORED)
            if row is None:
                state = _state(conn, inbox_id)
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
        return _salvage(inbox_id, failed.cause, publish), None, None
    lag = time.time() - row.received_at
    publish(result)
    outcome = Outcome(state=STORED, points=result.points_inserted, events=result.events_inserted, lag_s=lag,
                      run_ids=sorted(result.runs))
    return outcome, events, result.segments


class _Failed(Exception):
    """Carries a failure that no retry fixes out of the transaction it aborted."""

    def __init__(self, cause: BaseException) -> None:
        super().__init__(str(cause))
        self.cause = cause


def _detect(inbox_id: int, policy: Policy, events: list[dict[str, Any]] | None,
            segments: dict[Any, int] | None) -> IngestResult | None:
    """Phase two: claim the stored row, run the detectors, mark it done; a transaction of its own.

    A detector that raises costs nothing but its alerts: it is logged, the row is marked
    done with ``detector_error``, and None is returned.
    """
    now = time.time()
    try:
        with session_scope() as session:
            conn = session.connection()
            if events is None:  # a redelivery or the sweeper: read the batch back
                row = _claim(conn, inbox_id, STORED)
                if row is None:
                    return None
                events = decode(row.body)
                conn.execute(update(INBOX).where(INBOX.c.id == inbox_id).values(**_done_values(now, policy.retention_s)))
            elif _claim(conn, inbox_id, STORED, **_done_values(now, policy.retention_s)) is None:
                return None
            return detect_batch(conn, events, now, segments)
    except Exception as exc:
        if is_transient(exc):
            raise
        log.exception("ingest: inbox %d: the detectors failed; the batch is stored, its alerts are lost", inbox_id)
        with session_scope() as session:
            _claim(session.connection(), inbox_id, STORED,
                   **_done_values(now, policy.retention_s, detector_error=_describe(exc)))
        return None


# --- quarantine -----------------------------------------------------------------------------------


class _Busy(Exception):
    """Another worker holds the row."""


def _salvage(inbox_id: int, failure: BaseException, publish: Publish) -> Outcome:
    """Store what can be stored of a batch that failed as a whole, then quarantine the row.

    The batch's events are validated one by one, and the valid ones stored in halves,
    each part in its own transaction that first claims the (still pending) row, so two
    workers never salvage one batch at once, until every event that fails is alone.
    Returns ``stored`` (nothing failed after all: the detectors run next), ``quarantined``,
    or ``pending`` with ``retry_in`` when the database went away or another worker holds
    the row (what was stored stays: storage is idempotent).
    """
    with session_scope() as session:
        row = session.execute(select(INBOX.c.project_id, INBOX.c.body).where(INBOX.c.id == inbox_id)).first()
    if row is None:
        return Outcome(state=None)
    bad: list[dict[str, Any]] = []
    good: list[tuple[int, dict[str, Any]]] = []
    try:
        raw = json.loads(row.body, parse_constant=_not_json)["events"]
        for index, event in enumerate(raw):
            try:
                good.append((index, validate_event(event)))
            except Exception as exc:  # noqa: BLE001 - whatever a hostile event makes validation raise
                bad.append({"index": index, "error": _describe(exc)})
    except Exception as exc:  # noqa: BLE001 - the body itself is unusable
        good, bad = [], [{"index": None, "error": _describe(exc)}]
    outcome = Outcome(state=QUARANTINED)
    try:
        _store_parts(inbox_id, row.project_id, good, bad, outcome)
    except _Busy:
        return Outcome(state=PENDING, retry_in=BUSY_RETRY_S)
    except Exception as exc:
        if not is_transient(exc):
            raise
        return Outcome(state=PENDING, retry_in=BUSY_RETRY_S)
    for result in outcome.results:
        publish(result)
    if not bad:
        with session_scope() as session:
            claimed = _claim(session.connection(), inbox_id, PENDING, state=STORED)
        outcome.state = STORED if claimed is not None else _state_of(inbox_id)
        return outcome
    error = _describe(failure)
    with session_scope() as session:
        claimed = _claim(session.connection(), inbox_id, PENDING, state=QUARANTINED, error=error,
                         bad_events=bad, next_sweep_at=None)
    if claimed is None:
        return Outcome(state=_state_of(inbox_id))
    failed = {b["index"] for b in bad}
    stored = [e for i, e in good if i not in failed]
    log.error("ingest: inbox %d quarantined: %d of its events stored, %d not (first: %s); "
              "see `runcast quarantine show %d`", inbox_id, len(stored), len(bad), bad[0]["error"], inbox_id)
    if stored:
        _detect_salvaged(inbox_id, stored, publish)
    return outcome


def _store_parts(inbox_id: int, project_id: int | None, good: list[tuple[int, dict[str, Any]]],
                 bad: list[dict[str, Any]], outcome: Outcome) -> None:
    """Store ``good`` in halves until each failing event is alone; failing ones go to ``bad``."""
    if project_id is None:  # a legacy message whose token matched no project: nothing can be stored
        bad[:] = [{"index": None, "error": "no project: the message's token is invalid or revoked"}]
        return
    pending: list[list[tuple[int, dict[str, Any]]]] = [good] if good else []
    while pending:
        part = pending.pop(0)
        try:
            with session_scope() as session:
                if _claim(session.connection(), inbox_id, PENDING) is None:
                    raise _Busy
                result = store_batch(session, project_id, [e for _, e in part])
        except _Busy:
            raise
        except Exception as exc:
            if is_transient(exc):
                raise
            if len(part) == 1:
                bad.append({"index": part[0][0], "error": _describe(exc)})
            else:
                half = len(part) // 2
                pending[:0] = [part[:half], part[half:]]
            continue
        outcome.points += result.points_inserted
        outcome.events += result.events_inserted
        outcome.results.append(result)
    bad.sort(key=lambda b: -1 if b["index"] is None else b["index"])


def _detect_salvaged(inbox_id: int, events: list[dict[str, Any]], publish: Publish) -> None:
    """The detectors on the stored part of a quarantined batch (best effort: logged on failure)."""
    try:
        with session_scope() as session:
            result = detect_batch(session.connection(), events, time.time())
    except Exception:
        log.exception("ingest: inbox %d: the detectors failed on the stored part of a quarantined batch", inbox_id)
        return
    publish(result)


def _state_of(inbox_id: int) -> str | None:
    with session_scope() as session:
        return _state(session.connection(), inbox_id)


def _describe(exc: BaseException) -> str:
    """An exception as one line: its type and the first line of its message."""
    lines = str(exc).strip().splitlines()
    text = f"{type(exc).__name__}: {lines[0]}" if lines else type(exc).__name__
    return text[:MAX_ERROR_CHARS]


# --- adopting a message of the first task contract --------------------------------------------------


def adopt_legacy(events: Sequence[Any], project_id: int | None, token: str | None, received_at: float | None,
                 *, redeliver_after: float) -> int | None:
    """Put the batch of a contract-1 message (events in the message) into the inbox.

    Such messages come from an API or an SDK of the previous release still queued in
    the broker during an upgrade. Returns the new row's id, or None when its token is
    invalid: then the row is quarantined at once (visible to an operator, never lost
    silently).
    """
    from runcast.events import dumps_batch

    from runcast_server.core.auth import project_for_token

    now = time.time()
    try:
        body = dumps_batch(list(events))
    except Exception as exc:  # noqa: BLE001 - whatever the message held, it must end visible, not lost
        body, error = json.dumps({"unreadable": repr(events)[:10_000]}).encode(), f"unreadable batch: {_describe(exc)}"
    else:
        error = None
    with session_scope() as session:
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
