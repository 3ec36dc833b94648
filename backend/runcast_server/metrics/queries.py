"""The metrics read: any zoom level of a series from at most a few rows per bucket.

For a view ``[start, end]`` and ``max_points`` the query answers with the raw points
when every segment's series holds at most ``max_points`` points in the view (counted
with a ``LIMIT max_points + 1``, so the count costs what the answer would). Otherwise
it picks the smallest
exponent ``e`` whose aligned buckets ``[b * 2**e, (b + 1) * 2**e)`` number at most
``max_points`` over the view, reads the stored rollup level ``L`` with the largest
exponent ``<= e`` (raw points when ``e < 3``), and merges groups of ``2**(e - L)``
source rows in SQL. Levels are 3 apart, so a returned bucket is made of at most 4
source rows (more only past the top level, for views wider than ``2**24 * max_points``
steps): the cost follows ``max_points``, never the run length. min/max are merged as
min/max, so a one-step spike survives at every zoom; ``last`` is the ``last`` of
the source row with the highest ``last_step``; mean is ``sum(sum) / sum(count)``.

Every read of one answer happens in one snapshot (``db.read_snapshot``), together with
the run's ``version``: the answer holds exactly the batches up to that version, so a
viewer applies the live stream's messages after it and nothing is missed or counted twice.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass, field
from typing import Any

from sqlalchemy import Connection, Select, case, func, select
from sqlalchemy.orm import Session, aliased

from runcast_server.core.db import read_snapshot
from runcast_server.core.errors import Invalid, NotFound
from runcast_server.metrics.models import Rollup
from runcast_server.metrics.rollups import LEVELS
from runcast_server.policy.delay import Horizon, due_last_point
from runcast_server.reads.schemas import MetricSeries, MetricsResponse
from runcast_server.reads.values import aggregate_value, stored_value
from runcast_server.record.models import Point, Run, Segment, Series

_FMAX = sys.float_info.max


def plan_level(start: int, end: int, max_points: int) -> int:
    """The smallest exponent whose aligned buckets over ``[start, end]`` number at most ``max_points``.

    This satisfies ``2**e >= (end - start) / max_points`` and adds one step where
    the alignment of the edges would otherwise return a bucket too many.
    """
    e = 0
    while (end >> e) - (start >> e) + 1 > max_points:
        e += 1
    return e


def fits_raw(conn: Connection, series: Any, start: int, end: int, max_points: int, upto: int | None = None) -> bool:
    """Whether ``series`` holds at most ``max_points`` points in ``[start, end]`` (``upto``: of
    run versions up to it, for a delayed reader).

    The series' own counter answers when the view covers all of it; otherwise at most
    ``max_points + 1`` primary-key entries are read.
    """
    if series.min_step is None:
        return True
    if upto is None and start <= series.min_step and series.max_step <= end:
        return bool(series.n_points <= max_points)
    due = [Point.version <= upto] if upto is not None else []
    inside = (
        select(Point.step)
        .where(Point.series_id == series.id, Point.step >= start, Point.step <= end, *due)
        .limit(max_points + 1)
        .subquery()
    )
    return (conn.scalar(select(func.count()).select_from(inside)) or 0) <= max_points


def source_level(e: int) -> int:
    """The stored level to read for exponent ``e``: 0 (raw points) below the first rollup level."""
    return max((level for level in LEVELS if level <= e), default=0)


@dataclass
class Buckets:
    """Columns of one series' buckets, in step order."""

    step: list[int] = field(default_factory=list)
    last_step: list[int] = field(default_factory=list)
    min: list[float | str | None] = field(default_factory=list)
    max: list[float | str | None] = field(default_factory=list)
    mean: list[float | str | None] = field(default_factory=list)
    last: list[float | str | None] = field(default_factory=list)
    count: list[int] = field(default_factory=list)


def _raw_points(conn: Connection, series_id: int, start: int, end: int, upto: int | None = None) -> Buckets:
    query = select(Point.step, Point.value).where(Point.series_id == series_id, Point.step >= start, Point.step <= end)
    if upto is not None:
        query = query.where(Point.version <= upto)
    rows = conn.execute(query.order_by(Point.step)).all()
    if not rows:
        return Buckets()
    steps, values = (list(col) for col in zip(*rows, strict=True))
    wire: list[float | str | None] = [stored_value(v) for v in values]
    return Buckets(steps, steps, wire, wire, wire, wire, [1] * len(steps))


def _source(series_id: int, level: int, lo: int, hi: int, upto: int | None = None) -> Select[*tuple[Any, ...]]:
    """Rows of the stored level as (bucket, mn, mx, sm, cnt, lst, ls); raw points are level 0
    (only those of run versions up to ``upto`` when given: a delayed reader's bound)."""
    if level == 0:
        finite = Point.value.between(-_FMAX, _FMAX)
        due = [Point.version <= upto] if upto is not None else []
        return select(
            Point.step.label("bucket"),
            Point.value.label("mn"),
            Point.value.label("mx"),
            case((finite, Point.value), else_=0.0).label("sm"),
            case((finite, 1), else_=0).label("cnt"),
            Point.value.label("lst"),
            Point.step.label("ls"),
        ).where(Point.series_id == series_id, Point.step >= lo, Point.step <= hi, *due)
    return select(
        Rollup.bucket.label("bucket"),
        Rollup.min.label("mn"),
        Rollup.max.label("mx"),
        Rollup.sum.label("sm"),
        Rollup.count.label("cnt"),
        Rollup.last.label("lst"),
        Rollup.last_step.label("ls"),
    ).where(
        Rollup.series_id == series_id,
        Rollup.level == level,
        Rollup.bucket >= lo,
        Rollup.bucket <= hi,
    )


def _merge_query(
    series_id: int, level: int, lo: int, hi: int, shift: int, upto: int | None = None
) -> Select[*tuple[Any, ...]]:
    """Source rows merged ``2**shift`` at a time: (group, min, max, sum, count, last, last_step).

    ``last`` is picked from the source row that holds the group's highest step: one
    primary-key lookup per returned bucket (cheaper than ranking every source row
    with a window function, and the same SQL on SQLite and PostgreSQL).
    """
    src = _source(series_id, level, lo, hi, upto)
    if shift == 0:
        return src.order_by(src.selected_columns.bucket)
    sub = src.subquery("src")
    grouped = select((sub.c.bucket // (1 << shift)).label("grp"), *sub.c).subquery(
        "grouped"
    )
    g = (
        select(
            grouped.c.grp,
            func.min(grouped.c.mn).label("mn"),
            func.max(grouped.c.mx).label("mx"),
            func.sum(grouped.c.sm).label("sm"),
            func.sum(grouped.c.cnt).label("cnt"),
            func.max(grouped.c.ls).label("ls"),
        )
        .group_by(grouped.c.grp)
        .subquery("g")
    )
    if level == 0:
        point = aliased(Point, name="pick")
        last: Any = point.value
        target: Any = point
        on = (point.series_id == series_id) & (point.step == g.c.ls)
    else:
        rollup = aliased(Rollup, name="pick")
        last, target = rollup.last, rollup
        on = (
            (rollup.series_id == series_id)
            & (rollup.level == level)
            & (rollup.bucket == g.c.ls // (1 << level))
        )
    return (
        select(g.c.grp, g.c.mn, g.c.mx, g.c.sm, g.c.cnt, last, g.c.ls)
        .join_from(g, target, on)
        .order_by(g.c.grp)
    )


def merged_buckets(
    conn: Connection, series_id: int, start: int, end: int, e: int, *, cut: int | None = None, upto: int | None = None
) -> Buckets:
    """The aligned buckets of width ``2**e`` that meet ``[start, end]``, merged in SQL.

    ``cut``/``upto`` (a delayed reader, policy/delay.py): points from step ``cut`` on may
    belong to run versions after ``upto``; buckets from there are merged from the points
    up to ``upto``, the ones below from the stored rollups as usual."""
    if cut is not None and upto is not None:
        edge = (cut >> e) << e
        below = merged_buckets(conn, series_id, start, min(end, edge - 1), e) if start < edge else Buckets()
        if end < edge:
            return below
        lo = max(start, edge)
        if e == 0:
            return _concat(below, _raw_points(conn, series_id, lo, end, upto))
        return _concat(below, _rows(conn.execute(_merge_query(series_id, 0, lo, ((end >> e) + 1 << e) - 1, e, upto)).all(), e))
    if e == 0:
        return _raw_points(conn, series_id, start, end)
    level = source_level(e)
    shift = e - level
    # Whole output buckets, in source-bucket units: edges never depend on the view.
    lo = (start >> e) << shift
    hi = (((end >> e) + 1) << shift) - 1
    return _rows(conn.execute(_merge_query(series_id, level, lo, hi, shift)).all(), e)


def _rows(rows: Any, e: int) -> Buckets:
    if not rows:
        return Buckets()
    grp, mn, mx, sm, cnt, last, last_step = zip(*rows, strict=True)
    count = [int(c) for c in cnt]  # PostgreSQL sums BIGINT as NUMERIC
    return Buckets(
        step=[int(g) << e for g in grp],
        last_step=[int(s) for s in last_step],
        min=[aggregate_value(v) for v in mn],
        max=[aggregate_value(v) for v in mx],
        mean=[
            aggregate_value(bucket_mean(float(s), c, lo, hi)) if c else None
            for s, c, lo, hi in zip(sm, count, mn, mx, strict=True)
        ],
        last=[stored_value(v) for v in last],
        count=count,
    )


def bucket_mean(total: float, count: int, low: float | None, high: float | None) -> float:
    """``total / count``, the mean of a bucket's finite values, kept within its ``[low, high]`` (min and max).

    The division rounds: 128 steps of a constant 0.4 sum to a float whose mean is
    0.4000000000000000222, and a chart of that constant then draws noise on ticks of 1e-17.
    The true mean lies within the values, so the clamp only ever brings it closer.
    """
    mean = total / count
    if low is not None and mean < low:
        return float(low)
    if high is not None and mean > high:
        return float(high)
    return mean


def _concat(a: Buckets, b: Buckets) -> Buckets:
    return Buckets(*(getattr(a, f) + getattr(b, f) for f in ("step", "last_step", "min", "max", "mean", "last", "count")))


def query_metrics(
    session: Session,
    run: Run,
    *,
    key: str,
    segment: int | None,
    start: int | None,
    end: int | None,
    max_points: int,
    horizon: Horizon | None = None,
) -> MetricsResponse:
    """The ``GET /runs/{id}/metrics`` answer: every (or one) segment's series of ``key``, one level for all.

    ``horizon`` (a delayed reader): the answer holds the run versions up to ``horizon.version``
    and names that version."""
    if start is not None and end is not None and end < start:
        raise Invalid("end must not be less than start", field="end")
    conn = read_snapshot(session)
    version = conn.scalar(select(Run.version).where(Run.id == run.id)) or 0
    if horizon is not None:
        version = horizon.version
    query = (
        select(
            Series.id,
            Series.count.label("n_points"),
            Series.min_step,
            Series.max_step,
            Segment.index.label("segment"),
            Segment.start_step,
        )
        .join(Segment, Segment.id == Series.segment_id)
        .where(Series.run_id == run.id, Series.key == key)
        .order_by(Segment.index)
    )
    if segment is not None:
        exists = select(Segment.id).where(
            Segment.run_id == run.id, Segment.index == segment
        )
        if conn.scalar(exists) is None:
            raise NotFound(f"segment {segment}", field="segment")
        query = query.where(Segment.index == segment)
    series = conn.execute(query).all()
    cuts: dict[int, int] = {}
    if horizon is not None:
        series, cuts = _due_series(session, series, horizon)
    if not series:
        raise NotFound(f"metric {key!r}", field="key")
    lows = [s.min_step for s in series if s.min_step is not None]
    highs = [s.max_step for s in series if s.max_step is not None]
    lo = start if start is not None else min(lows, default=0)
    hi = end if end is not None else max(highs, default=lo)
    e = plan_level(lo, hi, max_points) if hi >= lo else 0
    upto = None if horizon is None else horizon.version
    if e > 0 and all(fits_raw(conn, s, lo, hi, max_points, upto if s.id in cuts else None) for s in series):
        e = 0
    out = []
    for s in series:
        b = merged_buckets(conn, s.id, lo, hi, e, cut=cuts.get(s.id), upto=upto) if hi >= lo else Buckets()
        out.append(
            MetricSeries.model_construct(
                segment=s.segment,
                start_step=s.start_step,
                step=b.step,
                last_step=b.last_step,
                min=b.min,
                max=b.max,
                mean=b.mean,
                last=b.last,
                count=b.count,
            )
        )
    return MetricsResponse(
        run=run.id, key=key, version=version, level=e, bucket_width=1 << e, series=out
    )


@dataclass(frozen=True)
class _DueSeries:
    """A series row as a delayed reader sees it (``max_step``: its highest due step)."""

    id: int
    n_points: int
    min_step: int | None
    max_step: int | None
    segment: int
    start_step: int


def _due_series(session: Session, series: Any, h: Horizon) -> tuple[list[Any], dict[int, int]]:
    """The series with a due point, bounded to their due steps; and the held back ones' cut steps."""
    out: list[Any] = []
    cuts: dict[int, int] = {}
    for s in series:
        if s.id not in h.frontier:
            out.append(s)
            continue
        last = due_last_point(session, s.id, h)
        if last is None:
            continue
        cuts[s.id] = h.frontier[s.id]
        # n_points counts held back points too: fits_raw counts the due ones in the view instead.
        out.append(_DueSeries(s.id, s.n_points, s.min_step, last[0], s.segment, s.start_step))
    return out, cuts
