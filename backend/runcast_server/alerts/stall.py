"""The periodic check: stalled runs (no event for ``stall.after_s``) and quiet restart loops.

Production: Celery beat sends ``runcast.alerts.sweep`` every ``RUNCAST_ALERT_CHECK_INTERVAL_S``
(run ``celery -A runcast_server.core.celery_app beat`` once, beside the workers; see
docs/alerts.md); a Redis ``SET NX EX`` lock makes overlapping sweeps skip a cycle.
Embedded: a thread of the application context's ``alerts.runner.AlertRunner``, started
and stopped with the app; it also prunes finished notification deliveries every
``RUNCAST_DELIVERY_PRUNE_INTERVAL_S`` (production: the beat task ``runcast.alerts.prune``).
"""

from __future__ import annotations

import logging
import time
from typing import TYPE_CHECKING, Any

from sqlalchemy import select, update

from runcast_server.alerts.engine import (
    RUN_LEVEL,
    apply_signal,
    load_configs,
)
from runcast_server.alerts.models import Alert, DetectorState
from runcast_server.core.models import Run
from runcast_server.detectors.runlevel import restart_quiet, stalled
from runcast_server.detectors.signals import Signal
from runcast_server.ingest.results import IngestResult
from runcast_server.reads.values import strict_json
from runcast_server.runs.versions import RunChange, write_version_log

if TYPE_CHECKING:
    from runcast_server.context import AppContext

MIN_QUIET_S = 1.0
log = logging.getLogger(__name__)


def _acquire(ctx: AppContext) -> Any:
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


def sweep(ctx: AppContext, now: float | None = None) -> int:
    """Open stall alerts and close quiet restart loops; returns how many alerts changed."""
    lock = _acquire(ctx)
    if lock is None:
        return 0
    try:
        return _sweep(ctx, now if now is not None else time.time(), ctx.settings.stall_after_s)
    finally:
        if ctx.alerts is not None and lock is ctx.alerts.sweep_lock:
            lock.release()


def _sweep(ctx: AppContext, now: float, stall_after_s: float) -> int:
    from runcast_server.alerts.notify import dispatch

    entries: list[dict[str, Any]] = []
    with ctx.database.scope() as session:
        conn = session.connection()
        rows = conn.execute(
            select(Run.id, Run.heartbeat_at, Run.last_step).where(
                Run.status == "running", Run.heartbeat_at < now - MIN_QUIET_S
            )
        ).all()
        open_stalls = set(conn.execute(select(Alert.run_id).where(Alert.kind == "stall", Alert.state == "open")).scalars())
        configs = load_configs(conn, [r.id for r in rows], stall_after_s)
        for rid, heartbeat_at, last_step in rows:
            cfg = configs[rid]
            p = cfg["stall"]
            if rid in open_stalls or not cfg.get("enabled", True) or not p.get("enabled", True):
                continue
            if not stalled(heartbeat_at, now, p):
                continue
            sig = Signal("stall", "open", last_step, {"heartbeat_at": heartbeat_at, "quiet_s": now - heartbeat_at,
                                                      "after_s": p["after_s"], "last_step": last_step})
            entries.extend(_with_version(conn, rid, sig, now))
        # restart loops that went quiet
        states = conn.execute(
            select(DetectorState).where(DetectorState.detector == "restart_loop", DetectorState.segment_id == RUN_LEVEL)
        ).scalars().all()
        rl_configs = load_configs(conn, [s.run_id for s in states])
        for st in states:
            state = dict(st.state)
            if not state.get("open"):
                continue
            for sig in restart_quiet(state, rl_configs[st.run_id]["restart_loop"], now):
                entries.extend(_with_version(conn, st.run_id, sig, now))
            conn.execute(
                update(DetectorState.__table__)
                .where(DetectorState.run_id == st.run_id, DetectorState.segment_id == RUN_LEVEL,
                       DetectorState.key == "", DetectorState.detector == "restart_loop")
                .values(state=strict_json(state), updated_at=now)
            )
    dispatch(ctx, entries)
    return len(entries)


def _with_version(conn: Any, rid: str, sig: Signal, now: float) -> list[dict[str, Any]]:
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
