"""The alerts engine: ``detect_batch`` runs the (pure) detectors on a batch after the
batch itself was committed, in a transaction of their own (``inbox.process``).

Per batch: lock the batch's runs (so two workers never run one run's detectors at once),
read the runs' overrides and the detector state rows of the segments the batch touches
(one query each), feed the points in step order, write alerts, their ``anomaly``
timeline events (as a new run version, so the live stream carries them) and the changed
state rows. A redelivered batch changes nothing: each detector state keeps the last step
it consumed and skips steps at or below it, and a restart loop remembers the segments it
counted.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from typing import Any, Final

from runcast.wire.columns import present
from runcast.wire.events import COLUMNS_TYPE, is_system_event
from sqlalchemy import Connection, Table, bindparam, select, update

from runcast_server.alerts.models import Alert, AlertConfig, DetectorState
from runcast_server.core.db import upsert
from runcast_server.detectors import config as dconfig
from runcast_server.detectors.core import Column, SegmentRunner, inherit
from runcast_server.detectors.runlevel import restart
from runcast_server.detectors.signals import Signal
from runcast_server.detectors.stats import stored_state
from runcast_server.ingest.checks import lock_runs, take_write_lock
from runcast_server.ingest.results import IngestResult
from runcast_server.reads.values import strict_json
from runcast_server.record.models import Event, Run, Segment
from runcast_server.runs.versions import RunChange, write_version_log

ALERTS: Table = Alert.__table__
STATES: Table = DetectorState.__table__
CONFIGS: Table = AlertConfig.__table__
EVENTS: Table = Event.__table__
SEGMENTS: Table = Segment.__table__
RUN_LEVEL = 0  # segment_id of run-level detector state

log = logging.getLogger(__name__)


# Built once: each runs for every batch, and building one costs more than running it.
_CONFIGS_OF: Final = select(CONFIGS.c.run_id, CONFIGS.c.overrides).where(CONFIGS.c.run_id.in_(bindparam("ids", expanding=True)))
_STATES_OF: Final = (select(STATES.c.run_id, STATES.c.segment_id, STATES.c.key, STATES.c.detector, STATES.c.state)
                     .where(STATES.c.run_id.in_(bindparam("ids", expanding=True))))
_OPEN_STALLS: Final = (select(ALERTS.c.id, ALERTS.c.run_id)
                       .where(ALERTS.c.run_id.in_(bindparam("ids", expanding=True)), ALERTS.c.kind == "stall",
                              ALERTS.c.state == "open"))


def load_configs(
    conn: Connection, run_ids: Sequence[str], stall_after_s: float | None = None
) -> dict[str, dict[str, Any]]:
    """run -> effective detector configuration (``stall_after_s``: the server's stall default)."""
    rows = dict(conn.execute(_CONFIGS_OF, {"ids": sorted(run_ids)}).all())
    return {rid: dconfig.effective(rows.get(rid), stall_after_s=stall_after_s) for rid in run_ids}


def save_overrides(conn: Connection, run_id: str, overrides: dict[str, Any], now: float) -> None:
    stmt = upsert(conn, CONFIGS).values(run_id=run_id, overrides=overrides, updated_at=now)
    conn.execute(stmt.on_conflict_do_update(index_elements=["run_id"], set_={"overrides": overrides, "updated_at": now}))


def detect_batch(
    conn: Connection,
    events: Sequence[dict[str, Any]],
    now: float,
    segments: dict[tuple[str, str], int] | None = None,
) -> IngestResult:
    """Run the detectors on a stored batch of validated events, in the caller's transaction.

    ``segments`` maps (run, segment uid) to segment ids (``IngestResult.segments``; read
    here when not given). Returns the runs whose version moved (alerts opened or closed)
    and ``alerts`` for notifications; the caller commits, then publishes and dispatches.
    """
    take_write_lock(conn)
    runs = lock_runs(conn, (e["run"] for e in events))
    if segments is None:
        segments = {
            (r, u): sid
            for sid, r, u in conn.execute(
                select(SEGMENTS.c.id, SEGMENTS.c.run_id, SEGMENTS.c.uid).where(SEGMENTS.c.run_id.in_(sorted(runs)))
            ).all()
        }
    result = IngestResult(
        runs={rid: RunChange(run=rid, version=row.version + 1, status=row.status, last_step=row.last_step)
              for rid, row in runs.items()},
        segments=segments,
    )
    stored = [e for e in events if e["run"] in runs and (e["run"], e["segment"]) in segments]
    run_detectors(conn, stored, segments, result, now)
    changed = [(rid, ch.version) for rid, ch in sorted(result.runs.items()) if ch.changed]
    if changed:
        conn.execute(update(Run).where(Run.id == bindparam("rid")).values(version=bindparam("ver")),
                     [{"rid": rid, "ver": ver} for rid, ver in changed])
        write_version_log(conn, result)
    return result


def run_detectors(
    conn: Connection,
    events: Sequence[dict[str, Any]],
    segments: dict[tuple[str, str], int],
    result: Any,
    now: float,
) -> None:
    """Feed the batch to the detectors; adds ``result.alerts`` entries for what opened or closed."""
    run_ids = sorted(result.runs)
    for e in events:
        if e["type"] == "run_started" and e.get("alerts"):
            save_overrides(conn, e["run"], e["alerts"], now)
    configs = load_configs(conn, run_ids)

    watched = {run: set().union(*cfg["keys"].values()) for run, cfg in configs.items()}  # keys some role reads
    columns_of = watched_columns(events, segments, watched)
    resumes: dict[str, list[tuple[float, int | None, int]]] = {}
    for e in events:
        if e["type"] == "run_started" and e.get("resume_step") is not None:
            resumes.setdefault(e["run"], []).append((e["ts"], e["resume_step"], segments[(e["run"], e["segment"])]))
    touched_runs = {r for r, _ in columns_of} | set(resumes)
    signals: list[tuple[str, int | None, Signal]] = []
    if touched_runs:
        states = _load_states(conn, sorted(touched_runs))
        changed: dict[tuple[str, int, str, str], dict[str, Any]] = {}
        for (run, seg), columns in sorted(columns_of.items()):
            seg_states = {(k, d): s for (r, sg, k, d), s in states.items() if r == run and sg == seg}
            if not seg_states:
                seg_states = _inherited(conn, states, run, seg)
            runner = SegmentRunner(configs[run], seg_states)
            for sig in runner.feed_columns(columns):
                signals.append((run, seg, sig))
            for k, d in runner.touched:
                changed[(run, seg, k, d)] = seg_states[(k, d)]
        for run, items in sorted(resumes.items()):
            p = configs[run]["restart_loop"]
            if not p.get("enabled", True) or not configs[run].get("enabled", True):
                continue
            sk = (run, RUN_LEVEL, "", "restart_loop")
            state = states.get(sk) or {}
            seen = state.setdefault("segments", [])
            for ts, step, seg in sorted(items):
                if seg in seen:
                    continue
                seen.append(seg)
                del seen[: max(0, len(seen) - 50)]
                for sig in restart(state, p, ts, step):
                    signals.append((run, None, sig))
            changed[sk] = state
        _save_states(conn, changed, now)
    for run, segment, sig in signals:  # segment None: a run-level signal
        entry = apply_signal(conn, run, segment, sig, now, result=result)
        if entry is not None:
            result.alerts.append(entry)
    close_stall_alerts(conn, sorted(_active_runs(events)), now, result)


def _active_runs(events: Sequence[dict[str, Any]]) -> set[str]:
    """The runs with an event other than a system sample; an event of a run already found is not looked at."""
    active: set[str] = set()
    for e in events:
        run = e["run"]
        if run not in active and not is_system_event(e):
            active.add(run)
    return active


def watched_columns(events: Sequence[dict[str, Any]], segments: dict[tuple[str, str], int],
                    watched: dict[str, set[str]]) -> dict[tuple[str, int], dict[str, Column]]:
    """(run, segment id) -> key -> the (steps, values) of the batch's metrics the detectors read (``watched``),
    in batch order; a ``metrics_columns`` event's column as it is, less its null cells (rows not logging it)."""
    out: dict[tuple[str, int], dict[str, Column]] = {}
    for e in events:
        kind = e["type"]
        if kind not in ("metrics", COLUMNS_TYPE):
            continue
        keys = watched[e["run"]]
        read = [(key, values) for key, values in e["values"].items() if key in keys]
        if not read:
            continue
        columns = out.setdefault((e["run"], segments[(e["run"], e["segment"])]), {})
        for key, values in read:
            column = columns.get(key)
            if column is None:
                column = columns[key] = ([], [])
            if kind == "metrics":
                column[0].append(e["step"])
                column[1].append(values)
            else:
                steps, kept = present(e["steps"], values)
                column[0].extend(steps)
                column[1].extend(kept)
    return out


def _load_states(conn: Connection, run_ids: list[str]) -> dict[tuple[str, int, str, str], dict[str, Any]]:
    rows = conn.execute(_STATES_OF, {"ids": run_ids})
    return {(r, s, k, d): dict(st) for r, s, k, d, st in rows}


def _inherited(conn: Connection, states: dict[tuple[str, int, str, str], dict[str, Any]], run: str, seg: int) -> dict[tuple[str, str], dict[str, Any]]:
    """A new segment's states: those of the run's previous segment (by index), history only."""
    rows = conn.execute(
        select(SEGMENTS.c.id, SEGMENTS.c.index).where(SEGMENTS.c.run_id == run).order_by(SEGMENTS.c.index)
    ).all()
    index = {sid: i for sid, i in rows}
    mine = index.get(seg)
    if mine is None:
        return {}
    previous = [sid for sid, i in rows if i < mine and any(r == run and s == sid for r, s, _, _ in states)]
    if not previous:
        return {}
    prev = previous[-1]
    return {(k, d): inherit(s) for (r, s_id, k, d), s in states.items() if r == run and s_id == prev}


def _save_states(conn: Connection, changed: dict[tuple[str, int, str, str], dict[str, Any]], now: float) -> None:
    if not changed:
        return
    rows = [
        {"run_id": r, "segment_id": s, "key": k, "detector": d, "state": strict_json(stored_state(st)), "updated_at": now}
        for (r, s, k, d), st in sorted(changed.items())
    ]
    conn.execute(_statement(conn, _save_state), rows)


_STATEMENTS: dict[tuple[str, Callable[[Connection], Any]], Any] = {}  # (dialect, builder) -> statement


def _statement(conn: Connection, build: Callable[[Connection], Any]) -> Any:
    """The statement ``build`` makes for ``conn``'s dialect, built once: each runs per batch or per
    signal with bound parameters, and building one (an ``excluded`` alias, a ``.values()`` of
    literals) costs more than executing it. (A run whose loss swings opens and closes alerts
    all along: statements built per signal were a quarter of its ingest time.)"""
    key = (conn.dialect.name, build)
    stmt = _STATEMENTS.get(key)
    if stmt is None:
        stmt = _STATEMENTS[key] = build(conn)
    return stmt


def _save_state(conn: Connection) -> Any:
    insert = upsert(conn, STATES)
    return insert.on_conflict_do_update(
        index_elements=["run_id", "segment_id", "key", "detector"],
        set_={"state": insert.excluded.state, "updated_at": insert.excluded.updated_at},
    )


def _open_alert(conn: Connection) -> Any:
    return upsert(conn, ALERTS).returning(ALERTS.c.id)


def _anomaly_event(conn: Connection) -> Any:
    return upsert(conn, EVENTS).on_conflict_do_nothing(index_elements=["segment_id", "seq"]).returning(EVENTS.c.id)


def _alert_event(conn: Connection) -> Any:
    return update(ALERTS).where(ALERTS.c.id == bindparam("b_alert")).values(event_id=bindparam("b_event"))


def _open_of_segment(conn: Connection) -> Any:
    return _open_query(ALERTS.c.segment_id == bindparam("b_segment"))


def _open_of_run(conn: Connection) -> Any:
    return _open_query(ALERTS.c.segment_id.is_(None))


def _open_query(segment: Any) -> Any:
    """The newest open alert of a run, kind and key (``b_run``, ``b_kind``, ``b_key``) in ``segment``."""
    a = ALERTS.c
    cond = (a.run_id == bindparam("b_run")) & (a.kind == bindparam("b_kind")) & (a.state == "open") & (a.key == bindparam("b_key"))
    return select(a.id, a.evidence, a.event_id, a.step).where(cond & segment).order_by(a.id.desc()).limit(1)


def _close_alert(conn: Connection) -> Any:
    return update(ALERTS).where(ALERTS.c.id == bindparam("b_alert")).values(
        state="closed", end_step=bindparam("b_end_step"), closed_at=bindparam("b_closed_at"), evidence=bindparam("b_evidence"))


def _event_payload(conn: Connection) -> Any:
    return update(EVENTS).where(EVENTS.c.id == bindparam("b_event")).values(payload=bindparam("b_payload"))


def _latest_segment(conn: Connection, run: str) -> int | None:
    return conn.execute(
        select(SEGMENTS.c.id).where(SEGMENTS.c.run_id == run).order_by(SEGMENTS.c.index.desc()).limit(1)
    ).scalar()


def apply_signal(
    conn: Connection, run: str, seg: int | None, sig: Signal, now: float, *, result: Any = None
) -> dict[str, Any] | None:
    """Open an alert (with its ``anomaly`` timeline event) or close the open one it ends.

    Returns the entry for notifications: ``{"id", "run", "phase", "kind"}``; None when a
    close finds nothing open.
    """
    evidence = strict_json(sig.evidence)
    if sig.phase == "open":
        alert_id = conn.execute(
            _statement(conn, _open_alert),
            {"run_id": run, "segment_id": seg, "key": sig.key, "kind": sig.kind, "state": "open", "step": sig.step,
             "end_step": None, "opened_at": now, "closed_at": None, "evidence": {"open": evidence}, "event_id": None},
        ).scalar_one()
        event_seg = seg if seg is not None else _latest_segment(conn, run)
        if event_seg is not None:
            payload = timeline_payload(alert_id, sig.kind, sig.key, "open", sig.step, None, {"open": evidence})
            change = result.runs.get(run) if result is not None else None
            event_id = conn.execute(
                _statement(conn, _anomaly_event),
                {"run_id": run, "segment_id": event_seg, "seq": -alert_id, "type": "anomaly", "step": sig.step,
                 "ts": now, "received_at": now, "version": None if change is None else change.version,
                 "payload": payload},
            ).scalar()
            if event_id is not None:
                conn.execute(_statement(conn, _alert_event), {"b_alert": alert_id, "b_event": event_id})
                if change is not None:  # the run's next version carries the event (live stream)
                    change.event_ids.append(event_id)
                    change.events.append("anomaly")
                    change.changed = True
        return {"id": alert_id, "run": run, "phase": "open", "kind": sig.kind}
    which = {"b_run": run, "b_kind": sig.kind, "b_key": sig.key}
    if seg is None:
        row = conn.execute(_statement(conn, _open_of_run), which).first()
    else:
        row = conn.execute(_statement(conn, _open_of_segment), {**which, "b_segment": seg}).first()
    if row is None:
        return None
    full = dict(row.evidence or {})
    full["close"] = evidence
    conn.execute(_statement(conn, _close_alert),
                 {"b_alert": row.id, "b_end_step": sig.step, "b_closed_at": now, "b_evidence": full})
    if row.event_id is not None:
        conn.execute(_statement(conn, _event_payload),
                     {"b_event": row.event_id,
                      "b_payload": timeline_payload(row.id, sig.kind, sig.key, "closed", row.step, sig.step, full)})
    return {"id": row.id, "run": run, "phase": "close", "kind": sig.kind}


def timeline_payload(alert_id: int, kind: str, key: str, state: str, step: int | None, end_step: int | None,
                     evidence: dict[str, Any]) -> dict[str, Any]:
    return {"alert": alert_id, "kind": kind, "key": key, "state": state, "step": step, "end_step": end_step,
            "evidence": evidence}


def close_stall_alerts(conn: Connection, run_ids: Sequence[str], now: float, result: Any = None) -> None:
    """Any event of a run ends its open stall alert, but for system samples: like the heartbeat
    (``ingest.state``), they keep coming from a process whose training hangs."""
    rows = conn.execute(_OPEN_STALLS, {"ids": list(run_ids)}).all()
    for _alert_id, run in rows:
        sig = Signal("stall", "close", None, {"reason": "activity", "quiet_s": None})
        entry = apply_signal(conn, run, None, sig, now, result=result)
        if entry is not None and result is not None:
            result.alerts.append(entry)


