"""Series, points and rollups of a batch's metrics: the hot path of ingest."""

from __future__ import annotations

from bisect import bisect_right
from collections.abc import Sequence
from math import floor
from typing import Any, Final, NotRequired, TypedDict

from runcast.wire.events import TIMESTAMP_KEY
from sqlalchemy import Connection, Insert, bindparam, case, func, select, update

from runcast_server.core.db import upsert
from runcast_server.ingest.bulk import DialectInsert, append_rows, bulk_insert, sqlite_cursor
from runcast_server.ingest.gather import gather
from runcast_server.ingest.results import IngestResult
from runcast_server.ingest.tables import POINTS, ROLLUPS, SERIES
from runcast_server.metrics.rollups import RollupDeltas, merge_set, rollup_deltas
from runcast_server.record import partitions


def write_metrics(
    conn: Connection,
    events: Sequence[dict[str, Any]],
    segments: dict[tuple[str, str], int],
    blocks: dict[str, int | None],
    result: IngestResult,
) -> dict[str, dict[str, tuple[int, float | None]]]:
    """Insert series, points and rollups; returns run -> key -> newest inserted (step, value).

    The hot path of ingest: plain dicts and lists, one statement per table. Each segment's
    step times go in as the series ``TIMESTAMP_KEY`` (the metrics event's ``ts``), thinned:
    among the steps of a segment that get a new logged point in this batch, in batch order, a
    step keeps its time when it falls in a later tenth of a second than the last one kept (the
    first always does; a step that has a time already keeps it). A step's time is then that
    of the last time point at or before it, to 0.1 s; a batch that stores nothing new writes
    no time either.
    """
    g = gather(events, segments)
    batch, run_of_segment, stamps = g.batch, g.run_of_segment, g.stamps
    result.points_received = g.received
    if not batch:
        return {}
    for seg, at in stamps.items():
        batch[(seg, TIMESTAMP_KEY)] = _thinned(at)

    series = _series_ids(conn, batch, run_of_segment, blocks)
    by_id = sorted((series[k][0], k) for k in batch)
    key_of = dict(by_id)
    # True while every step of the batch is past its series' highest stored step: then no
    # point can be stored already (points are only written here, under the run's lock).
    beyond = all((stored := series[k][1]) is None or min(batch[k]) > stored for k in batch)
    deltas: list[RollupDeltas] = []
    if beyond:  # the usual case: every point is new, the step times' included
        columns = _columns(batch, by_id, result, run_of_segment)
        sids, steps, values = columns[0], columns[1], columns[2]
        # Plain rows (no savepoint, no RETURNING, no ON CONFLICT: the cheapest write for
        # client and server); the rollups are summed while PostgreSQL stores them.
        append_rows(conn, "points", _POINT_COLUMNS, _POINT_TYPES, zip(*columns),
                    meanwhile=lambda: deltas.append(rollup_deltas(sids, steps, values)))
    else:
        logged = [(sid, k) for sid, k in by_id if k[1] != TIMESTAMP_KEY]
        columns = _columns(batch, logged, result, run_of_segment)
        inserted = _insert_points(conn, columns)
        new_keys = list(zip(columns[0], columns[1])) if inserted is None else inserted
        # A step's time goes in only with a point logged at it now, so a redelivered step (in
        # any batch, whatever its edges) changes nothing.
        new_steps = {(key_of[sid][0], step) for sid, step in new_keys}
        for _, k in by_id:
            if k[1] == TIMESTAMP_KEY:
                batch[k] = _thinned({st: ts for st, ts in stamps[k[0]].items() if (k[0], st) in new_steps})
        timed = [(sid, k) for sid, k in by_id if k[1] == TIMESTAMP_KEY and batch[k]]
        if timed:
            columns = _columns(batch, timed, result, run_of_segment)
            inserted = _insert_points(conn, columns)
            new_keys = [*new_keys, *(zip(columns[0], columns[1]) if inserted is None else inserted)]
        if not new_keys:
            result.points_inserted = 0
            return {}
        new_keys.sort()
        sids = [sid for sid, _ in new_keys]
        steps = [step for _, step in new_keys]
        values = [batch[key_of[sid]][step] for sid, step in new_keys]
        deltas.append(rollup_deltas(sids, steps, values))
    result.points_inserted = len(steps)

    _write_rollups(conn, deltas[0], {sid: series[k][1] for sid, k in by_id})

    # Per series: how many points, their step range and the newest one (the columns are sorted by
    # series, then step: each series' first and last point are its range).
    stats: dict[int, list[Any]] = {}
    lo = 0
    while lo < len(sids):
        sid = sids[lo]
        hi = bisect_right(sids, sid, lo)
        stats[sid] = [hi - lo, steps[lo], steps[hi - 1], values[hi - 1]]
        lo = hi
    newest: dict[str, dict[str, tuple[int, float | None]]] = {}
    for sid, (n, first, last, value) in sorted(stats.items()):
        seg, key = key_of[sid]
        run = run_of_segment[seg]
        change = result.runs[run]
        change.ranges.append([sid, first, last, n])
        change.points += n
        change.keys.add(key)
        change.changed = True
        if key == TIMESTAMP_KEY:  # the server's own points: not the client's, nor a last value of the run
            result.points_inserted -= n
            continue
        per_run = newest.setdefault(run, {})
        if key not in per_run or last > per_run[key][0]:
            per_run[key] = (last, value)
    conn.execute(_SERIES_STATS, [{"sid": sid, "n": st[0], "lo": st[1], "hi": st[2]} for sid, st in sorted(stats.items())])
    return newest


def _thinned(stamps: dict[int, float]) -> dict[int, float | None]:
    """The steps that keep their time (in batch order): each whose time falls in a later tenth of a
    second than the last one kept (the first always does)."""
    kept: dict[int, float | None] = {}
    last = -1
    for step, at in stamps.items():
        tenth = floor(at * 10)
        if tenth > last:
            kept[step] = at
            last = tenth
    return kept


def _columns(batch: dict[tuple[int, str], dict[int, Any]], series: list[tuple[int, tuple[int, str]]],
             result: IngestResult, run_of_segment: dict[int, str]) -> list[list[Any]]:
    """The point columns (series_id, step, value, version) of ``series`` (sorted by id), each in step order."""
    col_sid: list[int] = []
    col_step: list[int] = []
    col_value: list[float | None] = []
    col_version: list[int] = []
    for sid, k in series:
        points = batch[k]
        steps = sorted(points)
        col_sid.extend([sid] * len(steps))
        col_step.extend(steps)
        col_value.extend(map(points.__getitem__, steps))
        col_version.extend([result.runs[run_of_segment[k[0]]].version] * len(steps))
    return [col_sid, col_step, col_value, col_version]


_ROLLUP_COLUMNS = ("series_id", "level", "bucket", "min", "max", "sum", "count", "nan_count", "last", "last_step")
_ROLLUP_TYPES = ("int8", "int2", "int8", "float8", "float8", "float8", "int8", "int8", "float8", "int8")
_POINT_COLUMNS = ("series_id", "step", "value", "version")
_POINT_TYPES = ("int8", "int8", "float8", "int8")


def _write_rollups(conn: Connection, deltas: RollupDeltas, stored_max: dict[int, int | None]) -> None:
    """Merge rollup deltas into the stored rows (``stored_max``: series id -> highest stored step before this batch).

    The row of a bucket past its series' highest stored step cannot exist yet (rollup
    rows are made only from stored points, only here, under the run's lock), so those
    rows, nearly all of an in-order batch, are written as plain rows (``append_rows``);
    the rest (at most one per level and series for an in-order batch) are merged by
    INSERT ... ON CONFLICT DO UPDATE.
    """
    new, merge = deltas.rows(stored_max)
    if new:
        append_rows(conn, "rollups", _ROLLUP_COLUMNS, _ROLLUP_TYPES, new)
    if merge:
        bulk_insert(conn, ROLLUPS, _ROLLUP_COLUMNS, list(zip(*merge)), _merge_rollups)


def _merge_rollups(stmt: DialectInsert) -> Insert:
    return stmt.on_conflict_do_update(
        index_elements=["series_id", "level", "bucket"], set_=merge_set(ROLLUPS.c, stmt.excluded)
    )


class NewSeries(TypedDict):
    """A ``series`` row to create (``id`` set only in a run with a block)."""

    run_id: str
    segment_id: int
    key: str
    count: int
    min_step: int | None
    max_step: int | None
    id: NotRequired[int]


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
    segments = {"ids": sorted(run_of_segment)}

    def read() -> dict[tuple[int, str], tuple[int, int | None]]:
        return {(seg, key): (sid, hi) for sid, seg, key, hi in conn.execute(_SERIES_OF, segments) if (seg, key) in batch}

    found = read()
    missing = sorted(k for k in batch if k not in found)
    if missing:
        rows: list[NewSeries] = [
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


def _number_series(conn: Connection, rows: list[NewSeries], blocks: dict[str, int | None]) -> list[NewSeries]:
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


# Built once (each runs for every batch): the series of the batch's segments, and each series'
# count and step range moved on by a batch.
_SERIES_OF: Final = (select(SERIES.c.id, SERIES.c.segment_id, SERIES.c.key, SERIES.c.max_step)
                     .where(SERIES.c.segment_id.in_(bindparam("ids", expanding=True))))
_SERIES_STATS: Final = (
    update(SERIES)
    .where(SERIES.c.id == bindparam("sid"))
    .values(
        count=SERIES.c.count + bindparam("n"),
        min_step=_min_expr(SERIES.c.min_step, bindparam("lo")),
        max_step=_max_expr(SERIES.c.max_step, bindparam("hi")),
    )
)


def _insert_points(conn: Connection, columns: list[list[Any]]) -> list[tuple[int, int]] | None:
    """Insert points (columns series_id, step, value, version; sorted by key), skipping stored ones.

    Returns None when every point was inserted, else the ``(series_id, step)`` really
    inserted: the only points rollups may count. (A batch whose every step is past its
    series' highest stored step is appended by ``write_metrics`` itself.)

    On PostgreSQL, a plain INSERT is tried first, in a savepoint: when every
    point is new it skips ON CONFLICT's speculative insertion, a third WAL record per
    row; a batch that repeats a stored point falls back to ON CONFLICT. On SQLite the
    stored steps of the batch's ranges are read and only the others appended
    (``_insert_new_sqlite``).
    """
    if conn.dialect.name == "sqlite":
        return _insert_new_sqlite(conn, columns)
    if conn.dialect.name == "postgresql":
        from psycopg.errors import UniqueViolation

        savepoint = conn.begin_nested()
        try:
            bulk_insert(conn, POINTS, _POINT_COLUMNS, columns, _plain)
        except UniqueViolation:
            savepoint.rollback()
        else:
            savepoint.commit()
            return None
    rows = bulk_insert(conn, POINTS, _POINT_COLUMNS, columns, _skip_stored_returning_keys)
    return [(sid, step) for sid, step in rows]


def _plain(stmt: Insert) -> Insert:
    return stmt


def _skip_stored_returning_keys(stmt: DialectInsert) -> Insert:
    return stmt.on_conflict_do_nothing(index_elements=["series_id", "step"]).returning(
        POINTS.c.series_id, POINTS.c.step
    )


def _insert_new_sqlite(conn: Connection, columns: list[list[Any]]) -> list[tuple[int, int]]:
    """SQLite: append the points not stored yet; returns their ``(series_id, step)``.

    A resent batch (a retry after a timeout, a spool replay, a redelivery) takes this path:
    one index range read per series, then the plain append, where SQLAlchemy's multi-row
    ``INSERT ... ON CONFLICT DO NOTHING RETURNING`` cost about five times the append per
    point. Safe because SQLite has one writer, and ``store_batch`` holds it from its first
    statement (``take_write_lock``): no point can be stored between the read and the append.
    """
    ranges: dict[int, list[int]] = {}
    for sid, step in zip(columns[0], columns[1]):
        r = ranges.get(sid)
        if r is None:
            ranges[sid] = [step, step]
        elif step < r[0]:
            r[0] = step
        elif step > r[1]:
            r[1] = step
    lite = sqlite_cursor(conn)
    try:
        stored = {
            (sid, step)
            for sid, (lo, hi) in ranges.items()
            for (step,) in lite.execute("SELECT step FROM points WHERE series_id = ? AND step BETWEEN ? AND ?",
                                        (sid, lo, hi))
        }
    finally:
        lite.close()
    rows = [row for row in zip(*columns) if (row[0], row[1]) not in stored]
    if rows:
        append_rows(conn, "points", _POINT_COLUMNS, _POINT_TYPES, rows)
    return [(row[0], row[1]) for row in rows]
