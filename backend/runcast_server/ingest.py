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

import re
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from runcast.events import SYSTEM_PREFIX, encode_event, encode_value, is_system_event
from sqlalchemy import Connection, Insert, Table, bindparam, case, func, select, update
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.orm import Session

from runcast_server import partitions
from runcast_server.db import upsert
from runcast_server.models import (
    Event,
    Point,
    Project,
    Rollup,
    Run,
    RunVersion,
    Segment,
    Series,
)
from runcast_server.policy.store import record_initial
from runcast_server.rollups import merge_set, rollup_deltas
from runcast_server.run_updates import write_tags, write_updates

RUNS: Table = Run.__table__  # type: ignore[assignment]
SEGMENTS: Table = Segment.__table__  # type: ignore[assignment]
SERIES: Table = Series.__table__  # type: ignore[assignment]
POINTS: Table = Point.__table__  # type: ignore[assignment]
ROLLUPS: Table = Rollup.__table__  # type: ignore[assignment]
EVENTS: Table = Event.__table__  # type: ignore[assignment]
RUN_VERSIONS: Table = RunVersion.__table__  # type: ignore[assignment]

# Event types kept on the timeline (the ``events`` table); the rest only feed state.
TIMELINE_TYPES = frozenset({"run_started", "checkpoint", "data_mix", "manifest", "note", "finished"})
_PG_SQL: dict[tuple[str, tuple[str, ...], str], str] = {}  # compiled bulk statements
_BINARY_PARAM = re.compile(r"%\((a_\w+)\)s")
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
    # For the run_versions log (live-stream replay): [series_id, first_step, last_step, count]
    # of the points this batch inserted, and the ids of the timeline events it inserted.
    ranges: list[list[int]] = field(default_factory=list)
    event_ids: list[int] = field(default_factory=list)

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
    # Alerts this batch opened or closed: {"id", "run", "phase", "kind"} (detectors.hook).
    alerts: list[dict[str, Any]] = field(default_factory=list)
    # (run, segment uid) -> segment id of every segment of the batch's runs (for the detectors).
    segments: dict[tuple[str, str], int] = field(default_factory=dict)

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
    """An event for a run of another project: answered exactly as an unknown run (404), so
    that another project's run ids cannot be probed."""

    status = 404


class TakenRun(ForeignRun):
    """A run_started for an id another project's run holds (ids are random: a clash is a bug
    or a probe; the id cannot be used, so this one answer differs from an unknown id's)."""

    status = 409


class WrongProject(ForeignRun):
    """A run_started naming a project other than the token's."""

    status = 403


def _unknown_run(run: str) -> str:
    return f"unknown run {run!r}: send its run_started first"


# --- helpers ------------------------------------------------------------------------


def _bulk_insert(
    conn: Connection,
    table: Table,
    names: Sequence[str],
    columns: Sequence[Sequence[Any]],
    finish: Callable[[Insert], Insert],
) -> Sequence[Sequence[Any]]:
    """Insert rows, given column by column (``columns[i]`` holds ``names[i]``), in few round trips.

    ``finish`` must build the same clause every time it is called from one place
    (its statement is compiled once per table, columns and ``finish``).

    PostgreSQL: one ``INSERT ... SELECT * FROM unnest(<one array per column>)``
    whatever the row count. SQLite: a multi-row ``INSERT ... VALUES`` per page
    (SQLAlchemy's insertmanyvalues). ``finish`` adds the ``ON CONFLICT`` clause
    and any ``RETURNING``; it gets the statement so it can use ``stmt.excluded``.
    """
    if conn.dialect.name == "postgresql":
        key = (table.name, tuple(names), finish.__qualname__)
        sql = _PG_SQL.get(key)
        if sql is None:
            arrays = [bindparam(f"a_{c}", type_=postgresql.ARRAY(table.c[c].type)) for c in names]
            source = select(func.unnest(*arrays).table_valued(*names).render_derived())
            stmt = finish(postgresql.insert(table).from_select(list(names), source))
            # Arrays travel in binary (%b): parsing them as text costs more than the insert.
            sql = _PG_SQL[key] = _BINARY_PARAM.sub(r"%(\1)b", str(stmt.compile(dialect=conn.dialect)))
        params = {f"a_{c}": list(col) for c, col in zip(names, columns)}
        with conn.connection.dbapi_connection.cursor() as cursor:  # type: ignore[union-attr]
            cursor.execute(sql, params)
            return cursor.fetchall() if cursor.description else []
    stmt = finish(sqlite.insert(table))
    rows = [dict(zip(names, r)) for r in zip(*columns)]
    result = conn.execute(stmt, rows)
    return result.all() if result.returns_rows else []


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
                raise WrongProject(
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
    _check_owners(events, project_id, owner, stored_segments, started)


def _check_owners(
    events: Sequence[dict[str, Any]],
    project_id: int,
    owner: dict[str, int],
    stored_segments: set[tuple[str, str]] | dict[tuple[str, str], Any],
    started: dict[tuple[str, str], int],
) -> None:
    """The run and segment checks of ``check_batch``, on rows already read."""
    started_runs = {run for run, _ in started}
    for i, e in enumerate(events):
        run = e["run"]
        if run in owner and owner[run] != project_id:
            if e["type"] == "run_started":
                raise TakenRun(f"run id {run!r} is taken: start a new run", field="run", index=i)
            raise ForeignRun(_unknown_run(run), field="run", index=i)
        if run not in owner and run not in started_runs:
            raise UnknownRun(_unknown_run(run), field="run", index=i)
        key = (run, e["segment"])
        if key not in stored_segments and key not in started:
            raise UnknownRun(
                f"unknown segment {e['segment']!r} of run {run!r}: send its run_started first",
                field="segment",
                index=i,
            )


def lock_runs(conn: Connection, run_ids: Iterable[str]) -> dict[str, Any]:
    """Lock the runs' rows in id order and return them by id."""
    ids = sorted(set(run_ids))
    stmt = (
        select(
            RUNS.c.id, RUNS.c.project_id, RUNS.c.version, RUNS.c.status, RUNS.c.last_step, RUNS.c.last_values,
            RUNS.c.heartbeat_at, RUNS.c.block,
        )
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
            "public_paths": e.get("public_paths", False),
            "status": "running",
            "config": e["config"],
            "group_name": e.get("group"),
            "job_type": e.get("job_type"),
            "notes": e.get("notes"),
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
    conn.execute(upsert(conn, RUNS).on_conflict_do_nothing(index_elements=["id"]), rows)
    lock_runs(conn, firsts)
    write_tags(conn, [events[i] for i in sorted(started.values())])
    record_initial(conn, {run: e["policy"] for run, e in firsts.items() if e.get("policy")}, now)
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
            upsert(conn, SEGMENTS)
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
    it stamps events and the runs' heartbeat. The caller commits. The detectors
    are not run here: they run after the commit (``detectors.hook.detect_batch``).
    """
    conn = session.connection()
    now = received_at if received_at is not None else time.time()
    _take_write_lock(conn)
    started = _started(events)
    created_segments = 0
    if started:
        check_batch(session, project_id, events)
        created_segments = register_runs(session, project_id, events, received_at=now)
    # Without run_started (the usual batch) the checks read the rows locked here: the
    # same answer as check_batch, two round trips fewer.
    runs = lock_runs(conn, (e["run"] for e in events))
    blocks = partitions.ensure(conn, runs)
    segments = {
        (r, u): sid
        for sid, r, u in conn.execute(
            select(SEGMENTS.c.id, SEGMENTS.c.run_id, SEGMENTS.c.uid).where(SEGMENTS.c.run_id.in_(sorted(runs)))
        ).all()
    }
    if not started:
        _check_owners(events, project_id, {rid: row.project_id for rid, row in runs.items()}, segments, started)
    result = IngestResult(
        runs={rid: RunChange(run=rid, version=row.version + 1) for rid, row in runs.items()}, segments=segments
    )
    if created_segments:
        for e in events:
            if e["type"] == "run_started":
                result.runs[e["run"]].changed = True

    new_points = _write_metrics(conn, events, segments, blocks, result)
    inserted_types = _write_events(conn, events, segments, result, now)
    _update_runs(conn, events, runs, result, new_points, inserted_types, now)
    _write_lost(conn, events, segments)
    write_updates(conn, events, segments)
    _write_version_log(conn, result)
    return result


def _write_lost(conn: Connection, events: Sequence[dict[str, Any]], segments: dict[tuple[str, str], int]) -> None:
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


def _write_metrics(
    conn: Connection,
    events: Sequence[dict[str, Any]],
    segments: dict[tuple[str, str], int],
    blocks: dict[str, int | None],
    result: IngestResult,
) -> dict[str, dict[str, tuple[int, float | None]]]:
    """Insert series, points and rollups; returns run -> key -> newest inserted (step, value).

    The hot path of ingest: plain dicts and lists, one statement per table.
    """
    # (segment_id, key) -> {step: value (NaN as None)}; the first occurrence in the batch wins.
    batch: dict[tuple[int, str], dict[int, float | None]] = {}
    run_of_segment: dict[int, str] = {}
    received = 0
    for e in events:
        if e["type"] != "metrics":
            continue
        seg = segments[(e["run"], e["segment"])]
        run_of_segment[seg] = e["run"]
        step = e["step"]
        values = e["values"]
        received += len(values)
        for key, value in values.items():
            points = batch.get((seg, key))
            if points is None:
                points = batch[(seg, key)] = {}
            if step not in points:
                points[step] = None if value != value else value  # noqa: PLR0124  (NaN; the cheapest test in this loop)
    result.points_received = received
    if not batch:
        return {}

    series = _series_ids(conn, batch, run_of_segment, blocks)
    by_id = sorted((series[k][0], k) for k in batch)
    col_sid: list[int] = []
    col_step: list[int] = []
    col_value: list[float | None] = []
    col_version: list[int] = []
    # True while every step of the batch is past its series' highest stored step: then no
    # point can be stored already (points are only written here, under the run's lock).
    beyond = True
    for sid, k in by_id:
        points = batch[k]
        steps = sorted(points)
        stored_max = series[k][1]
        if stored_max is not None and steps[0] <= stored_max:
            beyond = False
        col_sid.extend([sid] * len(steps))
        col_step.extend(steps)
        col_value.extend([points[st] for st in steps])
        col_version.extend([result.runs[run_of_segment[k[0]]].version] * len(steps))
    inserted = _insert_points(conn, [col_sid, col_step, col_value, col_version], beyond=beyond)
    if inserted is None:  # the usual case: every point is new
        result.points_inserted = len(col_sid)
        new_points = list(zip(col_sid, col_step, col_value))
    else:
        result.points_inserted = len(inserted)
        if not inserted:
            return {}
        key_of = dict(by_id)
        inserted.sort()
        new_points = [(sid, step, batch[key_of[sid]][step]) for sid, step in inserted]

    _write_rollups(conn, rollup_deltas(new_points), {sid: series[k][1] for sid, k in by_id})

    # Per series: how many points, their step range and the newest one.
    stats: dict[int, list[Any]] = {}
    for sid, step, value in new_points:
        st = stats.get(sid)
        if st is None:
            stats[sid] = [1, step, step, value]
        else:
            st[0] += 1
            st[1] = min(st[1], step)
            if step > st[2]:
                st[2], st[3] = step, value
    key_of = dict(by_id)
    newest: dict[str, dict[str, tuple[int, float | None]]] = {}
    for sid, (n, lo, hi, value) in sorted(stats.items()):
        seg, key = key_of[sid]
        run = run_of_segment[seg]
        change = result.runs[run]
        change.ranges.append([sid, lo, hi, n])
        change.points += n
        change.keys.add(key)
        change.changed = True
        per_run = newest.setdefault(run, {})
        if key not in per_run or hi > per_run[key][0]:
            per_run[key] = (hi, value)
    c = SERIES.c
    conn.execute(
        update(SERIES)
        .where(c.id == bindparam("sid"))
        .values(
            count=c.count + bindparam("n"),
            min_step=_min_expr(c.min_step, bindparam("lo")),
            max_step=_max_expr(c.max_step, bindparam("hi")),
        ),
        [{"sid": sid, "n": st[0], "lo": st[1], "hi": st[2]} for sid, st in sorted(stats.items())],
    )
    return newest


_ROLLUP_COLUMNS = ("series_id", "level", "bucket", "min", "max", "sum", "count", "nan_count", "last", "last_step")
_ROLLUP_TYPES = ("int8", "int2", "int8", "float8", "float8", "float8", "int8", "int8", "float8", "int8")
_POINT_COLUMNS = ("series_id", "step", "value", "version")
_POINT_TYPES = ("int8", "int8", "float8", "int8")


def _write_rollups(conn: Connection, deltas: dict[tuple[int, int, int], list[Any]], stored_max: dict[int, int | None]) -> None:
    """Merge rollup deltas into the stored rows (``stored_max``: series id -> highest stored step before this batch).

    The row of a bucket past its series' highest stored step cannot exist yet (rollup
    rows are made only from stored points, only here, under the run's lock), so those
    rows, nearly all of an in-order batch, are written as plain rows (``_append_rows``);
    the rest (at most one per level and series for an in-order batch) are merged by
    INSERT ... ON CONFLICT DO UPDATE.
    """
    new: list[tuple[int, int, int]] = []
    merge: list[tuple[int, int, int]] = []
    for k in sorted(deltas):
        hi = stored_max[k[0]]
        (new if hi is None or k[2] > hi >> k[1] else merge).append(k)
    if new:
        _append_rows(conn, "rollups", _ROLLUP_COLUMNS, _ROLLUP_TYPES, [(*k, *deltas[k]) for k in new])
    if merge:
        _bulk_insert(
            conn,
            ROLLUPS,
            _ROLLUP_COLUMNS,
            [
                [k[0] for k in merge],
                [k[1] for k in merge],
                [k[2] for k in merge],
                *([deltas[k][i] for k in merge] for i in range(7)),
            ],
            _merge_rollups,
        )


def _merge_rollups(stmt: Insert) -> Insert:
    return stmt.on_conflict_do_update(
        index_elements=["series_id", "level", "bucket"], set_=merge_set(ROLLUPS.c, stmt.excluded)
    )


def _series_ids(
    conn: Connection,
    batch: dict[tuple[int, str], Any],
    run_of_segment: dict[int, str],
    blocks: dict[str, int | None],
) -> dict[tuple[int, str], tuple[int, int | None]]:
    """(segment_id, key) -> (series id, highest stored step) for every series of the batch.

    Reads first and creates only the missing rows (sorted, ON CONFLICT DO NOTHING),
    so a batch of known series costs one round trip. A run with a block (partitions.py)
    numbers its series inside the block, under its row lock; others take the sequence's.
    """
    query = select(SERIES.c.id, SERIES.c.segment_id, SERIES.c.key, SERIES.c.max_step).where(
        SERIES.c.segment_id.in_(sorted(run_of_segment))
    )

    def read() -> dict[tuple[int, str], tuple[int, int | None]]:
        return {(seg, key): (sid, hi) for sid, seg, key, hi in conn.execute(query) if (seg, key) in batch}

    found = read()
    missing = sorted(k for k in batch if k not in found)
    if missing:
        rows = [
            {"run_id": run_of_segment[seg], "segment_id": seg, "key": key, "count": 0, "min_step": None,
             "max_step": None}
            for seg, key in missing
        ]
        numbered = _number_series(conn, [r for r in rows if blocks[r["run_id"]]], blocks)
        insert = upsert(conn, SERIES).on_conflict_do_nothing(index_elements=["segment_id", "key"])
        for part in (numbered, [r for r in rows if not blocks[r["run_id"]]]):
            if part:
                conn.execute(insert, part)
        found = read()
    return found


def _number_series(conn: Connection, rows: list[dict[str, Any]], blocks: dict[str, int | None]) -> list[dict[str, Any]]:
    """Give each new series of a run with a block the next id of that block (ids ``block << 24 | n``)."""
    if not rows:
        return rows
    run_ids = sorted({r["run_id"] for r in rows})
    top: dict[str, int] = {
        rid: hi
        for rid, hi in conn.execute(
            select(SERIES.c.run_id, func.max(SERIES.c.id)).where(SERIES.c.run_id.in_(run_ids)).group_by(SERIES.c.run_id)
        )
    }
    for r in rows:
        lo, hi = partitions.series_range(blocks[r["run_id"]] or 0)
        r["id"] = max(top.get(r["run_id"], lo), lo) + 1
        if r["id"] >= hi:
            raise ValueError(f"run {r['run_id']!r} holds {hi - lo - 1} series, the most a run may hold")
        top[r["run_id"]] = r["id"]
    return rows


def _min_expr(column: Any, value: Any) -> Any:
    return case((column.is_(None) | (value < column), value), else_=column)


def _max_expr(column: Any, value: Any) -> Any:
    return case((column.is_(None) | (value > column), value), else_=column)


def _insert_points(conn: Connection, columns: list[list[Any]], *, beyond: bool = False) -> list[tuple[int, int]] | None:
    """Insert points (columns series_id, step, value, version; sorted by key), skipping stored ones.

    Returns None when every point was inserted, else the ``(series_id, step)`` really
    inserted: the only points rollups may count. ``beyond``: every step is past its
    series' highest stored step, so none can be stored already.

    With ``beyond`` the points are appended as plain rows (``_append_rows``: no
    savepoint, no RETURNING, no ON CONFLICT: the cheapest write for client and server).
    Otherwise, on PostgreSQL, a plain INSERT is tried first, in a savepoint: when every
    point is new it skips ON CONFLICT's speculative insertion, a third WAL record per
    row; a batch that repeats a stored point falls back to ON CONFLICT.
    """
    if beyond:
        _append_rows(conn, "points", _POINT_COLUMNS, _POINT_TYPES, zip(*columns))
        return None
    if conn.dialect.name == "postgresql":
        from psycopg.errors import UniqueViolation

        savepoint = conn.begin_nested()
        try:
            _bulk_insert(conn, POINTS, _POINT_COLUMNS, columns, _plain)
        except UniqueViolation:
            savepoint.rollback()
        else:
            savepoint.commit()
            return None
    rows = _bulk_insert(conn, POINTS, _POINT_COLUMNS, columns, _skip_stored_returning_keys)
    return [(sid, step) for sid, step in rows]


def _append_rows(conn: Connection, table: str, names: Sequence[str], pg_types: Sequence[str],
                 rows: Iterable[Sequence[Any]]) -> None:
    """Write rows that cannot conflict with stored ones, in the session's transaction.

    PostgreSQL: ``COPY ... FROM STDIN`` in binary (``pg_types``: the columns' types).
    SQLite: the driver's ``executemany`` of one prepared plain INSERT (SQLAlchemy's
    multi-row VALUES costs several times more client CPU per row). Any conflict still
    raises: nothing is skipped silently.
    """
    dbapi = conn.connection.dbapi_connection
    if conn.dialect.name == "postgresql":
        with (
            dbapi.cursor() as cursor,  # type: ignore[union-attr]
            cursor.copy(f"COPY {table} ({', '.join(names)}) FROM STDIN (FORMAT BINARY)") as copy,
        ):
            copy.set_types(list(pg_types))
            write = copy.write_row
            for row in rows:
                write(row)
        return
    cursor = dbapi.cursor()  # type: ignore[union-attr]
    try:
        cursor.executemany(f"INSERT INTO {table} ({', '.join(names)}) VALUES ({', '.join('?' * len(names))})", rows)
    finally:
        cursor.close()


def _plain(stmt: Insert) -> Insert:
    return stmt


def _skip_stored_returning_keys(stmt: Insert) -> Insert:
    return stmt.on_conflict_do_nothing(index_elements=["series_id", "step"]).returning(
        POINTS.c.series_id, POINTS.c.step
    )


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
                "version": result.runs[e["run"]].version,  # the batch's run version (policy/delay.py)
                "payload": {k: v for k, v in wire.items() if k not in _ENVELOPE},
            },
        )
    if not rows:
        return {}
    stmt = (
        upsert(conn, EVENTS)
        .on_conflict_do_nothing(index_elements=["segment_id", "seq"])
        .returning(EVENTS.c.run_id, EVENTS.c.type, EVENTS.c.id)
    )
    out: dict[str, set[str]] = {}
    for run, kind, event_id in conn.execute(stmt, [rows[k] for k in sorted(rows)]):
        out.setdefault(run, set()).add(kind)
        change = result.runs[run]
        change.events.append(kind)
        change.event_ids.append(event_id)
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
    # System samples (every rank's sampler, runcast.system) are points only: their step is a
    # wall-clock second and they keep coming from a rank whose training hangs.
    beating: set[str] = set()
    for e in events:
        if is_system_event(e):
            continue
        beating.add(e["run"])
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


def _write_version_log(conn: Connection, result: IngestResult) -> None:
    """One ``run_versions`` row per run whose version this batch bumped (the stream's replay log).

    ``committed_at`` is when the batch is stored (now), not when it arrived (a batch may
    wait in the inbox): the broadcast delay (policy/delay.py) counts from it."""
    now = time.time()
    rows = [
        {
            "run_id": rid,
            "version": ch.version,
            "status": ch.status,
            "last_step": ch.last_step,
            "committed_at": now,
            "points": ch.points,
            "ranges": ch.ranges,
            "event_ids": sorted(ch.event_ids),
        }
        for rid, ch in sorted(result.runs.items())
        if ch.changed
    ]
    if rows:
        conn.execute(upsert(conn, RUN_VERSIONS).on_conflict_do_nothing(index_elements=["run_id", "version"]), rows)
