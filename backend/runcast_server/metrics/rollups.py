"""Rollup levels and bucket math, shared by the ingest writer and the metrics reader.

A rollup at ``level`` L aggregates the aligned bucket ``[b * 2**L, (b + 1) * 2**L)``
of steps. Bucket edges depend only on the step, never on the data, so a new point
or a reload never moves an edge. Stored levels grow by a factor of 8, which keeps
the rollup rows at 1/7 of the points and lets any query read at most 4 rows per
bucket it returns.

A rollup's ``sum`` (of its finite values) is kept within ``[-SUM_LIMIT, SUM_LIMIT]``: values
near the float range would otherwise overflow it to infinity, and infinities of both signs
to NaN, which SQLite stores as NULL and PostgreSQL's float arithmetic refuses, so one
hostile point could fail a batch. Only a bucket whose sum passes 1e300 gets a wrong mean.
"""

from __future__ import annotations

import math
from bisect import bisect_left, bisect_right
from typing import Any, Final, cast

from sqlalchemy import ColumnElement, case, literal_column

LEVELS: Final = (3, 6, 9, 12, 15, 18, 21, 24)
SUM_LIMIT: Final = 1e300  # two sums within it add up without overflow

RollupKey = tuple[int, int, int]
"""``(series_id, level, bucket)``: the primary key of a rollup row."""


def rollup_deltas(
    sids: list[int], steps: list[int], values: list[float | None]
) -> dict[RollupKey, list[Any]]:
    """Aggregate newly stored points into one delta row per rollup key, at every level.

    The points come as columns (series id, step, value with NaN as None), sorted by series
    then step, each stored for the first time (deltas from repeats would count them twice).
    A delta is ``[min, max, sum, count, nan_count, last, last_step]`` with the meaning of the
    rollup columns; ``merge_set`` merges it into a stored row. The first level is built from
    the points, a bucket's values at once, each further level from the one below it.
    """
    first = LEVELS[0]
    level_rows: dict[RollupKey, list[Any]] = {}
    n = len(steps)
    i = 0
    while i < n:
        series_id = sids[i]
        end = bisect_right(sids, series_id, i)
        while i < end:
            bucket = steps[i] >> first
            j = bisect_left(steps, (bucket + 1) << first, i + 1, end)
            level_rows[(series_id, first, bucket)] = _bucket_delta(values[i:j], steps[j - 1])
            i = j
    deltas = dict(level_rows)
    below = first
    for level in LEVELS[1:]:
        shift = level - below
        upper: dict[RollupKey, list[Any]] = {}
        for (series_id, _, lower), d in level_rows.items():
            key = (series_id, level, lower >> shift)
            merged = upper.get(key)
            if merged is None:
                upper[key] = list(d)
                continue
            merge_delta(merged, d)
        deltas.update(upper)
        level_rows, below = upper, level
    return deltas


def _bucket_delta(values: list[float | None], last_step: int) -> list[Any]:
    """The delta of one bucket's values (in step order; ``last_step``: the step of the last).

    Finite values only (the usual bucket): the builtins over the whole list (``sum`` from
    -0.0 adds them one by one in order, as the loop does). Otherwise, or when their sum
    overflows, value by value.
    """
    if None not in values:
        floats = cast("list[float]", values)
        total = sum(floats, -0.0)
        if -math.inf < total < math.inf:
            return [min(floats), max(floats), clamp_sum(total), len(floats), 0, floats[-1], last_step]
    inf = math.inf
    first = values[0]
    finite = first is not None and -inf < first < inf
    row: list[Any] = [first, first, first if finite else 0.0, 1 if finite else 0, 0 if first is not None else 1, values[-1],
           last_step]
    for value in values[1:]:
        if value is None:
            row[4] += 1
            continue
        if row[0] is None or value < row[0]:
            row[0] = value
        if row[1] is None or value > row[1]:
            row[1] = value
        if -inf < value < inf:
            row[2] += value
            row[3] += 1
    row[2] = clamp_sum(row[2])
    return row


def merge_delta(row: list[Any], other: list[Any]) -> None:
    """Merge delta ``other`` into delta ``row`` in place (the Python twin of ``merge_set``)."""
    if other[0] is not None and (row[0] is None or other[0] < row[0]):
        row[0] = other[0]
    if other[1] is not None and (row[1] is None or other[1] > row[1]):
        row[1] = other[1]
    row[2] = clamp_sum(row[2] + other[2])
    row[3] += other[3]
    row[4] += other[4]
    if other[6] > row[6]:
        row[5] = other[5]
        row[6] = other[6]


def clamp_sum(total: float) -> float:
    """``total`` within ``[-SUM_LIMIT, SUM_LIMIT]`` (a sum of finite values is never NaN)."""
    return total if -SUM_LIMIT <= total <= SUM_LIMIT else math.copysign(SUM_LIMIT, total)


def merge_set(target: Any, excluded: Any) -> dict[str, Any]:
    """Column -> SQL expression that merges a delta row into a stored rollup row.

    ``target`` and ``excluded`` are the column collections of the stored row and of
    the proposed one (``Rollup.__table__.c`` and ``stmt.excluded``) in an
    ``INSERT ... ON CONFLICT DO UPDATE``. min/max use CASE, not LEAST/GREATEST, which
    treat NULL differently on SQLite and PostgreSQL.
    """
    t, x = target, excluded
    newer = x.last_step > t.last_step
    total = t.sum + x.sum  # both within SUM_LIMIT: no overflow
    # Inline numbers, not bound parameters: the statement runs as an executemany of the delta rows.
    limit: ColumnElement[float] = literal_column(repr(SUM_LIMIT))
    floor: ColumnElement[float] = literal_column(repr(-SUM_LIMIT))
    return {
        "min": case((x.min.is_(None), t.min), (t.min.is_(None) | (x.min < t.min), x.min), else_=t.min),
        "max": case((x.max.is_(None), t.max), (t.max.is_(None) | (x.max > t.max), x.max), else_=t.max),
        "sum": case((total > limit, limit), (total < floor, floor), else_=total),
        "count": t.count + x.count,
        "nan_count": t.nan_count + x.nan_count,
        "last": case((newer, x.last), else_=t.last),
        "last_step": case((newer, x.last_step), else_=t.last_step),
    }
