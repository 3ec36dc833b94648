"""The periodic check: stalled runs (no event for ``stall.after_s``), quiet restart loops, and the
team's commands past their time (``commands.service.expire``: each expired on the run's record,
and every open page of the run told, so a command whose trainer never came back does not stay
"pending"; docs/commands.md).

Production: Celery beat sends ``runcast.alerts.sweep`` every ``RUNCAST_ALERT_CHECK_INTERVAL_S``
(run ``celery -A runcast_server.core.celery_app beat`` once, beside the workers; see
docs/alerts.md); a Redis ``SET NX EX`` lock makes overlapping sweeps skip a cycle.
Embedded: a thread of the application context's ``alerts.runner.AlertRunner``, started
and stopped with the app; it also prunes finished notification deliveries every
``RUNCAST_DELIVERY_PRUNE_INTERVAL_S`` (production: the beat task ``runcast.alerts.prune``).

Each run is checked on its own, and writes in a savepoint of its own: a run whose check
fails (its state unreadable, a database error) is rolled back to it, logged with its id and
counted in ``runcast_alert_check_errors_total``; the other runs are checked all the same.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from functools import partial
from typing import TYPE_CHECKING, Any, NamedTuple

from sqlalchemy import Connection, select, update
from sqlalchemy.orm import Session

from runcast_server.alerts.engine import (
    RUN_LEVEL,
    STATES,
    apply_signal,
    load_configs,
)
from runcast_server.alerts.models import Alert
from runcast_server.commands import record
from runcast_server.commands.service import expire
from runcast_server.detectors.runlevel import restart_quiet, stalled
from runcast_server.detectors.signals import Signal
from runcast_server.ingest.checks import take_write_lock
from runcast_server.ingest.results import IngestResult
from runcast_server.reads.values import strict_json
from runcast_server.record.models import Run
from runcast_server.runs.versions import RunChange, write_version_log

if TYPE_CHECKING:
    from runcast_server.alerts.needs import AlertContext

MIN_QUIET_S = 1.0
log = logging.getLogger(__name__)

Entries = list[dict[str, Any]]  # notification entries of the alerts opened or closed


class Expired(NamedTuple):
    """A command the check expired."""

    run_id: str
    uid: str


def _acquire(ctx: AlertContext) -> Any:
    """A non-blocking lock so that sweeps never pile up; None when another one runs."""
    if ctx.alerts is not None:  # embedded: the process's lock
        lock = ctx.alerts.sweep_lock
        return lock if lock.acquire(blocking=False) else None
    import redis

    settings = ctx.settings
    client = redis.Redis.from_url(settings.redis_url or "", socket_connect_timeout=2, socket_timeout=5)
    if client.set("runcast:alerts:sweep", str(time.time()), nx=True, ex=max(1, int(settings.alert_check_interval_s))):
        return client
    return None


def sweep(ctx: AlertContext, now: float | None = None) -> int:
    """Open stall alerts, close quiet restart loops and expire the commands past their time; returns
    how many alerts changed."""
    lock = _acquire(ctx)
    if lock is None:
        return 0
    try:
        return _sweep(ctx, now if now is not None else time.time(), ctx.settings.stall_after_s)
    finally:
        if ctx.alerts is not None and lock is ctx.alerts.sweep_lock:
            lock.release()


def _sweep(ctx: AlertContext, now: float, stall_after_s: float) -> int:
    from runcast_server.alerts.notify import dispatch

    entries: Entries = []
    with ctx.database.scope() as session:
        conn = session.connection()
        take_write_lock(conn)  # SQLite: one write transaction, so that each run's savepoint nests in it
        rows = conn.execute(
            select(Run.id, Run.heartbeat_at, Run.last_step).where(
                Run.status == "running", Run.heartbeat_at < now - MIN_QUIET_S
            )
        ).all()
        open_stalls = set(conn.execute(select(Alert.run_id).where(Alert.kind == "stall", Alert.state == "open")).scalars())
        quiet = [r for r in rows if r.id not in open_stalls]
        configs = load_configs(conn, [r.id for r in quiet], stall_after_s)
        for rid, heartbeat_at, last_step in quiet:
            entries += _isolated(ctx, "stall", rid, partial(_stall, conn, rid, heartbeat_at, last_step, configs[rid], now))
        s = STATES.c
        loops = conn.execute(
            select(s.run_id, s.state).where(s.detector == "restart_loop", s.segment_id == RUN_LEVEL, s.key == "")
        ).all()
        loop_configs = load_configs(conn, [rid for rid, _ in loops])
        for rid, state in loops:
            entries += _isolated(ctx, "restart_loop", rid, partial(_quiet_loop, conn, rid, state, loop_configs[rid], now))
        expired = _expire_commands(ctx, session, now)
    dispatch(ctx, entries)
    for command in expired:
        try:
            ctx.hub.publish(command.run_id, record.notice(command.run_id, command.uid, "expired"))
        except Exception:  # stored: an open page misses only the notice (the version reaches it)
            log.warning("alerts: the commands notice for run %s could not be published", command.run_id, exc_info=True)
    return len(entries)


def _expire_commands(ctx: AlertContext, session: Session, now: float) -> list[Expired]:
    """The commands past their time, expired in a savepoint of their own (an error is logged and
    counted, and the next check tries again)."""
    try:
        with session.begin_nested():
            return [Expired(c.run_id, c.uid) for c in expire(session, now)]
    except Exception:
        log.exception("alerts: expiring the commands past their time failed; the next check tries again")
        if ctx.metrics is not None:
            ctx.metrics.alert_check_errors.labels("command_expiry").inc()
        return []


def _isolated(ctx: AlertContext, check: str, run_id: str, work: Callable[[], Entries]) -> Entries:
    """``work()`` for one run (which writes in a savepoint); an error is logged and counted, and
    the run's writes are rolled back to its savepoint: no entries, the other runs go on."""
    try:
        return work()
    except Exception:
        log.exception("alerts: the %s check of run %s failed; the other runs were checked", check, run_id,
                      extra={"run_id": run_id})
        metrics = ctx.metrics
        if metrics is not None:
            metrics.alert_check_errors.labels(check).inc()
        return []


def _stall(conn: Connection, rid: str, heartbeat_at: float | None, last_step: int | None, cfg: dict[str, Any],
           now: float) -> Entries:
    """Open a stall alert for a quiet running run whose silence passed its threshold."""
    p = cfg["stall"]
    if not cfg.get("enabled", True) or not p.get("enabled", True) or not stalled(heartbeat_at, now, p):
        return []
    sig = Signal("stall", "open", last_step, {"heartbeat_at": heartbeat_at, "quiet_s": now - heartbeat_at,
                                              "after_s": p["after_s"], "last_step": last_step})
    with conn.begin_nested():  # a failure rolls back this run's writes only
        return _with_version(conn, rid, sig, now)


def _quiet_loop(conn: Connection, rid: str, stored: dict[str, Any], cfg: dict[str, Any], now: float) -> Entries:
    """Close a run's open restart-loop alert once no resume came for ``span_s``."""
    state = dict(stored)
    signals = restart_quiet(state, cfg["restart_loop"], now)
    if not signals:
        return []
    entries: Entries = []
    s = STATES.c
    with conn.begin_nested():  # a failure rolls back this run's writes only
        for sig in signals:
            entries += _with_version(conn, rid, sig, now)
        conn.execute(
            update(STATES)
            .where(s.run_id == rid, s.segment_id == RUN_LEVEL, s.key == "", s.detector == "restart_loop")
            .values(state=strict_json(state), updated_at=now)
        )
    return entries


def _with_version(conn: Connection, rid: str, sig: Signal, now: float) -> Entries:
    """Apply a run-level signal as a new run version, so the live stream carries its event."""
    q = select(Run.version, Run.status, Run.last_step).where(Run.id == rid)
    if conn.dialect.name != "sqlite":
        q = q.with_for_update()
    row = conn.execute(q).first()
    if row is None:
        return []
    change = RunChange(run=rid, version=row.version + 1, changed=True, status=row.status, last_step=row.last_step)
    result = IngestResult(runs={rid: change})
    entry = apply_signal(conn, rid, None, sig, now, result=result)
    if entry is None:
        return []
    conn.execute(update(Run).where(Run.id == rid).values(version=change.version))
    write_version_log(conn, result)
    return [entry]
