"""The write path: store a batch of validated events, idempotently and in any order.

``store_batch`` is the one function that writes runs, segments, series, points,
rollups and timeline events. It is safe to run twice on the same batch (every row
has a natural key and is written with ``ON CONFLICT``), and batches of one run may
arrive in any order: rollups are merged from the points a batch really inserted,
and run state only ever moves forward (max step, newest value, latest status).

Concurrency: the rows of the runs a batch touches are locked first, in id order
(``SELECT ... FOR UPDATE`` on PostgreSQL; SQLite takes its database write lock
with the first statement), and every other write is sorted by primary key, so
two workers never deadlock and never race on a segment index or a run version.
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from sqlalchemy import Connection, Insert, Table, bindparam, case, select, update
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.orm import Session

from runcast.events import encode_event, encode_value
from runcast_server.models import Event, Point, Project, Rollup, Run, Segment, Series
from runcast_server.rollups import merge_set, rollup_deltas

RUNS: Table = Run.__table__  # type: ignore[assignment]
SEGMENTS: Table = Segment.__table__  # type: ignore[assignment]
SERIES: Table = Series.__table__  # type: ignore[assignment]
POINTS: Table = Point.__table__  # type: ignore[assignment]
ROLLUPS: Table = Rollup.__table__  # type: ignore[assignment]
EVENTS: Table = Event.__table__  # type: ignore[assignment]

# Event types kept on the timeline (the ``events`` table); the rest only feed state.
TIMELINE_TYPES = frozenset({"run_started", "checkpoint", "data_mix", "manifest", "note", "finished"})
_ENVELOPE = ("v", "type", "run", "segment", "seq", "ts", "step")


# --- results and rejections ---------------------------------------------------------


@dataclass
class RunChange:
    """What one batch did to one run."""

    run: str
    version: int
    changed: bool = False
    status: str = "running"
    last_step: int | None = None
    keys: set[str] = field(default_factory=set)
    points: int = 0
    events: list[str] = field(default_factory=list)

    def message(self) -> dict[str, Any]:
        """The live message for this change (channel ``run:<id>``)."""
        return {
            "run": self.run,
            "version": self.version,
            "status": self.status,
            "last_step": self.last_step,
            "keys": sorted(self.keys),
            "points": self.points,
            "events": self.events,
        }


@dataclass
class IngestResult:
    """The outcome of ``store_batch``: per-run changes and what was really written."""

    runs: dict[str, RunChange] = field(default_factory=dict)
    points_received: int = 0
    points_inserted: int = 0
    events_inserted: int = 0

    def messages(self) -> list[tuple[str, dict[str, Any]]]:
        """``(run_id, message)`` for every run the batch changed, to publish after commit."""
        return [(rid, ch.message()) for rid, ch in sorted(self.runs.items()) if ch.changed]


class IngestRejected(Exception):
    """A batch that can never be stored as sent: ``status`` is the HTTP status to answer."""

    status = 400

    def __init__(self, message: str, *, field: str, index: int) -> None:
        super().__init__(message)
        self.message = message
        self.field = field
        self.index = index


class UnknownRun(IngestRejected):
    """An event for a run (or segment) with no run_started stored or in the batch."""

    status = 404


class ForeignRun(IngestRejected):
    """A run of another project, or a run_started naming another project."""

    status = 403


# --- helpers ------------------------------------------------------------------------


def _insert(conn: Connection, table: Table) -> Insert:
    """``INSERT`` with ``ON CONFLICT`` support for the connection's dialect."""
    dialect = postgresql if conn.dialect.name == "postgresql" else sqlite
    return dialect.insert(table)


def _is_sqlite(conn: Connection) -> bool:
    return conn.dialect.name == "sqlite"


def _started(events: Sequence[dict[str, Any]]) -> dict[tuple[str, str], int]:
    """(run, segment) -> index of its run_started in the batch."""
    out: dict[tuple[str, str], int] = {}
    for i, e in enumerate(events):
        if e["type"] == "run_started":
            out.setdefault((e["run"], e["segment"]), i)
    return out


# --- checks and run registration -----------------------------------------------------


def check_batch(session: Session, project_id: int, events: Sequence[dict[str, Any]]) -> None:
    """Raise ForeignRun or UnknownRun for the first event the project may not write.

    Every event's run must be stored under ``project_id`` or started in this
    batch, and every event's segment stored or started in this batch. Reads only.
    """
    conn = session.connection()
    started = _started(events)
    if started:
        name = conn.execute(select(Project.name).where(Project.id == project_id)).scalar_one()
        for i in sorted(started.values()):
            if events[i]["project"] != name:
                raise ForeignRun(
                    f"run_started names project {events[i]['project']!r}, the token is for {name!r}",
                    field="project",
                    index=i,
                )
    run_ids = sorted({e["run"] for e in events})
    owner = dict(conn.execute(select(RUNS.c.id, RUNS.c.project_id).where(RUNS.c.id.in_(run_ids))).all())
    stored_segments: set[tuple[str, str]] = set()
    if owner:
        stored_segments = {
            (r, u)
            for r, u in conn.execute(
                select(SEGMENTS.c.run_id, SEGMENTS.c.uid).where(SEGMENTS.c.run_id.in_(sorted(owner)))
            ).all()
        }
    started_runs = {run for run, _ in started}
    for i, e in enumerate(events):
        run = e["run"]
        if run in owner and owner[run] != project_id:
            raise ForeignRun(f"run {run!r} belongs to another project", field="run", index=i)
        if run not in owner and run not in started_runs:
            raise UnknownRun(f"unknown run {run!r}: send its run_started first", field="run", index=i)
        key = (run, e["segment"])
        if key not in stored_segments and key not in started:
            raise UnknownRun(
                f"unknown segment {e['segment']!r} of run {run!r}: send its run_started first",
                field="segment",
                index=i,
            )


def _lock_runs(conn: Connection, run_ids: Iterable[str]) -> dict[str, Any]:
    """Lock the runs' rows in id order and return them by id."""
    ids = sorted(set(run_ids))
    stmt = (
        select(RUNS.c.id, RUNS.c.version, RUNS.c.status, RUNS.c.last_step, RUNS.c.last_values, RUNS.c.heartbeat_at)
        .where(RUNS.c.id.in_(ids))
        .order_by(RUNS.c.id)
    )
    if not _is_sqlite(conn):
        stmt = stmt.with_for_update()
    return {row.id: row for row in conn.execute(stmt)}


def _take_write_lock(conn: Connection) -> None:
    """On SQLite, start the write transaction now so reads and writes see one state.

    pysqlite opens a transaction only at the first write; a no-op UPDATE makes
    that happen before we read run state (PostgreSQL uses row locks instead).
    """
    if _is_sqlite(conn):
        conn.execute(update(RUNS).where(RUNS.c.id == "").values(version=RUNS.c.version))


def register_runs(
    session: Session, project_id: int, events: Sequence[dict[str, Any]], *, received_at: float | None = None
) -> int:
    """Create the runs and segments of the batch's run_started events; returns segments made.

    Idempotent. Segment indexes count segments in creation order per run; the run
    row is locked first, so two writers never pick the same index.
    """
    started = _started(events)
    if not started:
        return 0
    conn = session.connection()
    now = received_at if received_at is not None else time.time()
    _take_write_lock(conn)
    firsts: dict[str, dict[str, Any]] = {}
    for (run, _), i in sorted(started.items()):
        e = events[i]
        if run not in firsts or e["ts"] < firsts[run]["ts"]:
            firsts[run] = e
    rows = [
        {
            "id": run,
            "project_id": project_id,
            "name": e["name"],
            "visibility": e["visibility"],
            "status": "running",
            "config": e["config"],
            "code": e["code"],
            "env": e["env"],
            "seed": e["seed"],
            "created_at": now,
            "started_at": e["ts"],
            "finished_at": None,
            "heartbeat_at": None,
            "last_step": None,
            "last_values": {},
            "version": 0,
        }
        for run, e in sorted(firsts.items())
    ]
    conn.execute(_insert(conn, RUNS).on_conflict_do_nothing(index_elements=["id"]), rows)
    _lock_runs(conn, firsts)
    existing = {
        (r, u)
        for r, u in conn.execute(
            select(SEGMENTS.c.run_id, SEGMENTS.c.uid).where(SEGMENTS.c.run_id.in_(sorted(firsts)))
        ).all()
    }
    # New segments in the order the trainer opened them (ts, then seq).
    new = sorted(
        (events[i] for key, i in started.items() if key not in existing),
        key=lambda e: (e["run"], e["ts"], e["seq"], e["segment"]),
    )
    made = 0
    for e in new:
        next_index = (
            select(SEGMENTS.c.index + 1).where(SEGMENTS.c.run_id == e["run"]).order_by(SEGMENTS.c.index.desc()).limit(1)
        ).scalar_subquery()
        index = conn.execute(select(next_index)).scalar() or 0
        resume = e["resume_step"]
        result = conn.execute(
            _insert(conn, SEGMENTS)
            .values(
                run_id=e["run"],
                uid=e["segment"],
                index=index,
                start_step=resume or 0,
                resumed=resume is not None,
                started_at=e["ts"],
            )
            .on_conflict_do_nothing(index_elements=["run_id", "uid"])
        )
        made += result.rowcount or 0
    return made


# --- the batch writer ---------------------------------------------------------------


def store_batch(
    session: Session,
    project_id: int,
    events: Sequence[dict[str, Any]],
    *,
    received_at: float | None = None,
) -> IngestResult:
    """Write a batch of validated events (``events.validate_event`` output) in the session's transaction.

    Raises ForeignRun / UnknownRun (nothing written) when an event may not be
    stored. ``received_at`` is the server time the batch arrived (default: now);
    it stamps events and the runs' heartbeat. The caller commits.
    """
    conn = session.connection()
    now = received_at if received_at is not None else time.time()
    _take_write_lock(conn)
    check_batch(session, project_id, events)
    created_segments = register_runs(session, project_id, events, received_at=now)

    runs = _lock_runs(conn, (e["run"] for e in events))
    result = IngestResult(runs={rid: RunChange(run=rid, version=row.version + 1) for rid, row in runs.items()})
    segments = {
        (r, u): sid
        for sid, r, u in conn.execute(
            select(SEGMENTS.c.id, SEGMENTS.c.run_id, SEGMENTS.c.uid).where(SEGMENTS.c.run_id.in_(sorted(runs)))
        ).all()
    }
    if created_segments:
        for e in events:
            if e["type"] == "run_started":
                result.runs[e["run"]].changed = True

    new_points = _write_metrics(conn, events, segments, result)
    inserted_types = _write_events(conn, events, segments, result, now)
    _update_runs(conn, events, runs, result, new_points, inserted_types, now)
    return result


def _write_metrics(
    conn: Connection,
    events: Sequence[dict[str, Any]],
    segments: dict[tuple[str, str], int],
    result: IngestResult,
) -> dict[str, dict[str, tuple[int, float | None]]]:
    """Insert series, points and rollups; returns run -> key -> newest inserted (step, value)."""
    # (segment_id, key) -> run, and the batch's points, first occurrence wins.
    series_keys: dict[tuple[int, str], str] = {}
    batch: dict[tuple[int, str, int], float | None] = {}
    received = 0
    for e in events:
        if e["type"] != "metrics":
            continue
        seg = segments[(e["run"], e["segment"])]
        step = e["step"]
        for key, value in e["values"].items():
            received += 1
            series_keys.setdefault((seg, key), e["run"])
            batch.setdefault((seg, key, step), None if value != value else value)
    result.points_received = received
    if not batch:
        return {}

    ordered_keys = sorted(series_keys)
    conn.execute(
        _insert(conn, SERIES).on_conflict_do_nothing(index_elements=["segment_id", "key"]),
        [
            {"run_id": series_keys[k], "segment_id": k[0], "key": k[1], "count": 0, "min_step": None, "max_step": None}
            for k in ordered_keys
        ],
    )
    series_ids: dict[tuple[int, str], int] = {}
    seg_ids = sorted({k[0] for k in ordered_keys})
    for sid, seg, key in conn.execute(
        select(SERIES.c.id, SERIES.c.segment_id, SERIES.c.key).where(SERIES.c.segment_id.in_(seg_ids))
    ):
        if (seg, key) in series_keys:
            series_ids[(seg, key)] = sid
    run_of_series = {series_ids[k]: run for k, run in series_keys.items()}
    key_of_series = {series_ids[k]: k[1] for k in series_keys}

    version_of = {sid: result.runs[run].version for sid, run in run_of_series.items()}
    rows = sorted(
        (sid, step, value, version_of[sid])
        for (seg, key, step), value in batch.items()
        for sid in (series_ids[(seg, key)],)
    )
    values = {(sid, step): value for sid, step, value, _ in rows}
    inserted = _insert_points(conn, rows)
    result.points_inserted = len(inserted)
    if not inserted:
        return {}
    inserted.sort()
    new_points = [(sid, step, values[(sid, step)]) for sid, step in inserted]

    deltas = rollup_deltas(new_points)
    stmt = _insert(conn, ROLLUPS)
    stmt = stmt.on_conflict_do_update(
        index_elements=["series_id", "level", "bucket"], set_=merge_set(ROLLUPS.c, stmt.excluded)
    )
    conn.execute(
        stmt,
        [
            {
                "series_id": k[0],
                "level": k[1],
                "bucket": k[2],
                "min": d[0],
                "max": d[1],
                "sum": d[2],
                "count": d[3],
                "nan_count": d[4],
                "last": d[5],
                "last_step": d[6],
            }
            for k, d in sorted(deltas.items())
        ],
    )

    stats: dict[int, list[int]] = {}
    newest: dict[str, dict[str, tuple[int, float | None]]] = {}
    for sid, step, value in new_points:
        s = stats.get(sid)
        if s is None:
            stats[sid] = [1, step, step]
        else:
            s[0] += 1
            s[1] = min(s[1], step)
            s[2] = max(s[2], step)
        run, key = run_of_series[sid], key_of_series[sid]
        change = result.runs[run]
        change.points += 1
        change.keys.add(key)
        change.changed = True
        per_run = newest.setdefault(run, {})
        if key not in per_run or step > per_run[key][0]:
            per_run[key] = (step, value)
    c = SERIES.c
    conn.execute(
        update(SERIES)
        .where(c.id == bindparam("sid"))
        .values(
            count=c.count + bindparam("n"),
            min_step=_min_expr(c.min_step, bindparam("lo")),
            max_step=_max_expr(c.max_step, bindparam("hi")),
        ),
        [{"sid": sid, "n": n, "lo": lo, "hi": hi} for sid, (n, lo, hi) in sorted(stats.items())],
    )
    return newest


def _min_expr(column: Any, value: Any) -> Any:
    return case((column.is_(None) | (value < column), value), else_=column)


def _max_expr(column: Any, value: Any) -> Any:
    return case((column.is_(None) | (value > column), value), else_=column)


def _insert_points(
    conn: Connection, rows: list[tuple[int, int, float | None, int]]
) -> list[tuple[int, int]]:
    """Insert ``(series_id, step, value, version)`` rows sorted by key, skipping stored ones.

    Returns the ``(series_id, step)`` really inserted: the only points rollups may count.
    """
    stmt = (
        _insert(conn, POINTS)
        .on_conflict_do_nothing(index_elements=["series_id", "step"])
        .returning(POINTS.c.series_id, POINTS.c.step)
    )
    params = [{"series_id": sid, "step": step, "value": value, "version": ver} for sid, step, value, ver in rows]
    return [(sid, step) for sid, step in conn.execute(stmt, params)]


def _write_events(
    conn: Connection,
    events: Sequence[dict[str, Any]],
    segments: dict[tuple[str, str], int],
    result: IngestResult,
    now: float,
) -> dict[str, set[str]]:
    """Insert timeline events once per (segment, seq); returns run -> types really inserted."""
    rows: dict[tuple[int, int], dict[str, Any]] = {}
    for e in events:
        if e["type"] not in TIMELINE_TYPES:
            continue
        seg = segments[(e["run"], e["segment"])]
        wire = encode_event(e)
        rows.setdefault(
            (seg, e["seq"]),
            {
                "run_id": e["run"],
                "segment_id": seg,
                "seq": e["seq"],
                "type": e["type"],
                "step": e.get("step"),
                "ts": e["ts"],
                "received_at": now,
                "payload": {k: v for k, v in wire.items() if k not in _ENVELOPE},
            },
        )
    if not rows:
        return {}
    stmt = (
        _insert(conn, EVENTS)
        .on_conflict_do_nothing(index_elements=["segment_id", "seq"])
        .returning(EVENTS.c.run_id, EVENTS.c.type)
    )
    out: dict[str, set[str]] = {}
    for run, kind in conn.execute(stmt, [rows[k] for k in sorted(rows)]):
        out.setdefault(run, set()).add(kind)
        change = result.runs[run]
        change.events.append(kind)
        change.changed = True
        result.events_inserted += 1
    return out


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


def _update_runs(
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
    for e in events:
        step = e.get("step")
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
                old = last_values.get(key)
                if old is None or step > old[0]:
                    last_values[key] = [step, encode_value(float("nan") if value is None else value)]
        status, started_at, finished_at = statuses.get(rid, (row.status, None, None))
        heartbeat = now if row.heartbeat_at is None or now > row.heartbeat_at else row.heartbeat_at
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
    c = RUNS.c
    base = {"heartbeat_at": bindparam("hb"), "last_step": bindparam("ls"), "last_values": bindparam("lv"),
            "status": bindparam("st"), "version": bindparam("ver")}
    plain = [p for p, with_status, _, _ in params if not with_status]
    if plain:
        conn.execute(update(RUNS).where(c.id == bindparam("rid")).values(**base), plain)
    timed = [dict(p, sa=sa, fa=fa) for p, with_status, sa, fa in params if with_status]
    if timed:
        conn.execute(
            update(RUNS)
            .where(c.id == bindparam("rid"))
            .values(**base, started_at=bindparam("sa"), finished_at=bindparam("fa")),
            timed,
        )
