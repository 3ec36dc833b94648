"""The inbox sweeper: enqueue again what was not stored in time; delete old done rows.

A row accepted ``RUNCAST_INBOX_REDELIVER_AFTER_S`` ago and still pending (or stored but
not through its detectors) is enqueued again: its message may have been lost with a
Redis restart, or be held by a killed worker until the broker's visibility timeout.
Each time, the wait before the next try doubles (up to 10 minutes), so a long backlog
costs a few duplicate messages, each of which finds the row done or locked and does
nothing. Rows a worker is storing right now are skipped (``SKIP LOCKED``).

Production: Celery beat sends ``runcast.inbox.sweep`` every ``RUNCAST_INBOX_SWEEP_INTERVAL_S``
(``runcast worker --beat``, or the ``beat`` service of docker-compose.yml). Embedded: a
``SweepTimer`` thread in the API process, which stores the rows itself.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from dataclasses import asdict, dataclass
from typing import Final

from sqlalchemy import CursorResult, bindparam, delete, select, update

from runcast_server.core.db import Database
from runcast_server.core.settings import Settings
from runcast_server.inbox.rows import DONE, INBOX, PENDING, STORED

MAX_SWEEP_BACKOFF_S: Final = 600.0
ROWS_PER_SWEEP: Final = 1000
PRUNE_PER_SWEEP: Final = 10_000

log = logging.getLogger(__name__)


@dataclass
class SweepResult:
    enqueued: int = 0
    pruned: int = 0
    failed: int = 0  # rows whose enqueue failed (the broker is down): tried again next time

    def as_dict(self) -> dict[str, int]:
        return asdict(self)


def sweep(db: Database, now: float, settings: Settings, enqueue: Callable[[int], None]) -> SweepResult:
    """One pass: enqueue the rows that are due, then delete done rows past their retention."""
    result = SweepResult()
    for inbox_id in due_rows(db, now, settings.inbox_redeliver_after_s):
        try:
            enqueue(inbox_id)
        except Exception:
            result.failed += 1
            log.warning("inbox sweep: could not enqueue inbox %d", inbox_id, exc_info=result.failed == 1)
        else:
            result.enqueued += 1
    result.pruned = prune(db, now)
    if result.enqueued or result.failed:
        log.warning("inbox sweep: enqueued %d batches not stored in time (%d failed)", result.enqueued, result.failed)
    return result


def due_rows(db: Database, now: float, redeliver_after: float) -> list[int]:
    """Ids of pending or stored rows whose time is up, with their next time pushed back (committed)."""
    c = INBOX.c
    with db.scope() as session:
        conn = session.connection()
        rows = conn.execute(
            select(c.id, c.sweeps)
            .where(c.state.in_((PENDING, STORED)), c.next_sweep_at <= now)
            .order_by(c.id)
            .limit(ROWS_PER_SWEEP)
            .with_for_update(skip_locked=True)
        ).all()
        if rows:
            conn.execute(
                update(INBOX).where(c.id == bindparam("rid")).values(sweeps=bindparam("n"), next_sweep_at=bindparam("at")),
                [{"rid": rid, "n": n + 1, "at": now + min(MAX_SWEEP_BACKOFF_S, redeliver_after * 2 ** (n + 1))}
                 for rid, n in rows],
            )
    return [rid for rid, _ in rows]


def prune(db: Database, now: float) -> int:
    """Delete done rows whose retention ended (at most ``PRUNE_PER_SWEEP`` per pass)."""
    c = INBOX.c
    with db.scope() as session:
        old = select(c.id).where(c.state == DONE, c.next_sweep_at <= now).limit(PRUNE_PER_SWEEP).scalar_subquery()
        pruned = session.execute(delete(INBOX).where(c.id.in_(old)))
        return (pruned.rowcount or 0) if isinstance(pruned, CursorResult) else 0  # a DELETE's result is one


class SweepTimer:
    """Embedded mode: a daemon thread that sweeps every ``interval`` seconds, storing due rows itself."""

    def __init__(self, db: Database, settings: Settings, store: Callable[[int], None]) -> None:
        self._db = db
        self._settings = settings
        self._store = store
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="runcast-inbox-sweep", daemon=True)

    def start(self) -> SweepTimer:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(timeout=10)

    def run_once(self, now: float) -> SweepResult:
        return sweep(self._db, now, self._settings, self._store)

    def _loop(self) -> None:
        import time

        while True:  # the first pass at once: rows a crash left behind
            try:
                self.run_once(time.time())
            except Exception:
                log.exception("inbox sweep failed")
            if self._stop.wait(self._settings.inbox_sweep_interval_s):
                return
