"""Run and segment state a batch moves forward: heartbeat, last step and values, status, version, holes."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Final

from runcast.wire.events import COLUMNS_TYPE, SYSTEM_PREFIX, encode_value, is_system_event
from sqlalchemy import Connection, bindparam, select, update

from runcast_server.ingest.results import IngestResult
from runcast_server.ingest.tables import EVENTS, RUNS, SEGMENTS


def _run_status(conn: Connection, run_ids: Sequence[str]) -> dict[str, tuple[str, float | None, float | None]]:
    """run -> (status, started_at, finished_at) from its stored run_started/finished events.

    The latest event by trainer time (then segment index, then seq) decides, so
    the answer does not depend on the order batches arrived in.
    """
    e, s = EVENTS.c, SEGMENTS.c
    rows = conn.execute(
        select(e.run_id, e.type, e.ts, e.payload)
        .join(SEGMENTS, s.id == e.segment_id)
        .where(e.run_id.in_(sorted(run_ids)), e.type.in_(("run_started", "finished")))
        .order_by(e.run_id, e.ts, s.index, e.seq)
    ).all()
    out: dict[str, tuple[str, float | None, float | None]] = {}
    for run, kind, ts, payload in rows:
        started = out.get(run, ("running", None, None))[1]
        if kind == "run_started":
            out[run] = ("running", ts if started is None else min(started, ts), None)
        else:
            out[run] = (payload.get("status", "finished"), started, ts)
    return out


def update_runs(
    conn: Connection,
    events: Sequence[dict[str, Any]],
    runs: dict[str, Any],
    result: IngestResult,
    newest: dict[str, dict[str, tuple[int, float | None]]],
    inserted_types: dict[str, set[str]],
    now: float,
) -> None:
    """Move each run's state forward: heartbeat, last step, last values, status, version."""
    steps: dict[str, int] = {}
    # System samples (every rank's sampler, runcast.system) are points only: their step is a
    # wall-clock second and they keep coming from a rank whose training hangs.
    beating: set[str] = set()
    for e in events:
        if is_system_event(e):
            continue
        beating.add(e["run"])
        step = max(e["steps"]) if e["type"] == COLUMNS_TYPE else e.get("step")
        if step is not None and (e["run"] not in steps or step > steps[e["run"]]):
            steps[e["run"]] = step
    status_runs = [r for r, kinds in inserted_types.items() if kinds & {"run_started", "finished"}]
    statuses = _run_status(conn, status_runs) if status_runs else {}

    params = []
    for rid in sorted(runs):
        row, change = runs[rid], result.runs[rid]
        last_step = row.last_step
        if rid in steps and (last_step is None or steps[rid] > last_step):
            last_step = steps[rid]
            change.changed = True
        last_values = row.last_values
        if rid in newest:
            last_values = dict(last_values or {})
            for key, (step, value) in newest[rid].items():
                if key.startswith(SYSTEM_PREFIX):
                    continue
                old = last_values.get(key)
                if old is None or step > old[0]:
                    last_values[key] = [step, encode_value(float("nan") if value is None else value)]
        status, started_at, finished_at = statuses.get(rid, (row.status, None, None))
        heartbeat = row.heartbeat_at
        if rid in beating and (heartbeat is None or now > heartbeat):
            heartbeat = now
        if not change.changed:
            change.version = row.version
        change.status, change.last_step = status, last_step
        if not change.changed and heartbeat == row.heartbeat_at:
            continue
        p = {
            "rid": rid,
            "hb": heartbeat,
            "ls": last_step,
            "lv": last_values,
            "st": status,
            "ver": change.version,
        }
        params.append((p, rid in statuses, started_at, finished_at))
    plain = [p for p, with_status, _, _ in params if not with_status]
    if plain:
        conn.execute(_RUN_STATE, plain)
    timed = [dict(p, sa=sa, fa=fa) for p, with_status, sa, fa in params if with_status]
    if timed:
        conn.execute(_RUN_STATE_TIMED, timed)


# Built once (the first runs for every batch): a run's state moved on, with its start and finish times or not.
_RUN_STATE: Final = update(RUNS).where(RUNS.c.id == bindparam("rid")).values(
    heartbeat_at=bindparam("hb"), last_step=bindparam("ls"), last_values=bindparam("lv"), status=bindparam("st"),
    version=bindparam("ver"),
)
_RUN_STATE_TIMED: Final = _RUN_STATE.values(started_at=bindparam("sa"), finished_at=bindparam("fa"))


def write_lost(conn: Connection, events: Sequence[dict[str, Any]], segments: dict[tuple[str, str], int]) -> None:
    """Keep the highest count of lost events each segment's SDK reported (a hole in the run)."""
    lost: dict[int, int] = {}
    for e in events:
        n = e.get("lost")
        if n:
            seg = segments[(e["run"], e["segment"])]
            lost[seg] = max(n, lost.get(seg, 0))
    if lost:
        c = SEGMENTS.c
        conn.execute(
            update(SEGMENTS).where(c.id == bindparam("sid"), c.lost_events < bindparam("n")).values(lost_events=bindparam("n")),
            [{"sid": sid, "n": n} for sid, n in sorted(lost.items())],
        )
