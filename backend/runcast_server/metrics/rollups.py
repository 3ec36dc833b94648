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
from typing import Any, Final, cast

import numpy as np
from sqlalchemy import ColumnElement, case, literal_column

LEVELS: Final = (3, 6, 9, 12, 15, 18, 21, 24)
SUM_LIMIT: Final = 1e300  # two sums within it add up without overflow

RollupRow = tuple[Any, ...]
"""A ``rollups`` row: series_id, level, bucket, min, max, sum, count, nan_count, last, last_step."""


def rollup_deltas(sids: list[int], steps: list[int], values: list[float | None]) -> RollupDeltas:
    """Aggregate newly stored points into one delta row per rollup key, at every level.

    The points come as columns (series id, step, value with NaN as None), sorted by series
    then step, each stored for the first time (deltas from repeats would count them twice).
    A delta has the rollup row's columns and meaning; ``merge_set`` merges it into a stored row.

    Computed over arrays: a level's buckets hold at most 8 of the level below (``LEVELS``
    grow by 8), so each level is a table of 8 columns, one row a bucket, reduced column by
    column in step order. The floats are those of taking the points one at a time: a sum
    adds its finite values in step order from the bucket's first, the min and max keep the
    first of equal values (signed zeros), a sum past the float range is clamped (``clamp_sum``);
    each level above the first merges the buckets below it the same way, one at a time.
    """
    if not steps:
        return RollupDeltas([])
    sid = np.asarray(sids, dtype=np.int64)
    step = np.asarray(steps, dtype=np.int64)
    value = np.array(values, dtype=np.float64)  # None -> NaN (a stored NaN is None)
    levels = [_first_level(sid, step, value)]
    while len(levels) < len(LEVELS):
        levels.append(levels[-1].upper())
    return RollupDeltas(levels)


class RollupDeltas:
    """A batch's rollup deltas at every level, as columns."""

    def __init__(self, levels: list[_Level]) -> None:
        self._levels = levels

    def rows(self, stored_max: dict[int, int | None]) -> tuple[list[RollupRow], list[RollupRow]]:
        """The deltas as rows in key order, split in two: those of buckets past their series' highest
        stored step before the batch (``stored_max``, series id -> step; such a row cannot exist yet),
        and the others, to be merged into a stored row."""
        if not self._levels:
            return [], []
        columns = [np.concatenate([getattr(lv, name) for lv in self._levels]) for name in _Level.COLUMNS]
        order = np.lexsort((columns[2], columns[1], columns[0]))
        columns = [c[order] for c in columns]
        sid, level, bucket = columns[:3]
        known = np.array(sorted(stored_max), dtype=np.int64)
        highest = np.array([-1 if stored_max[k] is None else stored_max[k] for k in known.tolist()], dtype=np.int64)
        past = bucket > (highest[np.searchsorted(known, sid)] >> level)
        return _tuples(columns, past), _tuples(columns, ~past)


def _tuples(columns: list[np.ndarray], keep: np.ndarray) -> list[RollupRow]:
    sid, level, bucket, low, high, total, count, nans, last, last_step = (c[keep] for c in columns)
    return list(zip(sid.tolist(), level.tolist(), bucket.tolist(), _or_none(low), _or_none(high), total.tolist(),
                    count.tolist(), nans.tolist(), _or_none(last), last_step.tolist()))


class _Level:
    """One level's deltas as columns (``COLUMNS``, a rollup row's), sorted by (series, bucket)."""

    COLUMNS: Final = ("sid", "level", "bucket", "low", "high", "total", "count", "nans", "last", "last_step")

    def __init__(self, level: int, sid: np.ndarray, bucket: np.ndarray, low: np.ndarray, high: np.ndarray,
                 total: np.ndarray, count: np.ndarray, nans: np.ndarray, last: np.ndarray, last_step: np.ndarray) -> None:
        self.sid, self.bucket, self.low, self.high, self.total = sid, bucket, low, high, total
        self.count, self.nans, self.last, self.last_step = count, nans, last, last_step
        self.level = np.full(len(sid), level, dtype=np.int64)

    def upper(self) -> _Level:
        """The next level: each of its buckets merges up to 8 of these, in step order."""
        group, starts, ends = _groups(self.sid, self.bucket >> _FANOUT)
        grid = _Grid(len(starts), group, self.bucket & _SLOTS)
        total = np.full(len(starts), -0.0)
        for column in grid.columns(self.total, -0.0):
            total = _clamped(total + column)
        return _Level(int(self.level[0]) + _FANOUT, self.sid[starts], self.bucket[starts] >> _FANOUT,
                      grid.fold(np.less, self.low), grid.fold(np.greater, self.high), total,
                      np.add.reduceat(self.count, starts), np.add.reduceat(self.nans, starts),
                      self.last[ends - 1], self.last_step[ends - 1])


_FANOUT: Final = LEVELS[1] - LEVELS[0]  # 3: a bucket holds 2**3 of the level below
_SLOTS: Final = (1 << _FANOUT) - 1


class _Grid:
    """A level's members placed in a table, a row a bucket and a column a slot (bucket & 7)."""

    def __init__(self, buckets: int, group: np.ndarray, slot: np.ndarray) -> None:
        self.shape, self.group, self.slot = (buckets, _SLOTS + 1), group, slot

    def columns(self, member: np.ndarray, pad: float) -> list[np.ndarray]:
        table = np.full(self.shape, pad)
        table[self.group, self.slot] = member
        return list(table.T)

    def fold(self, beats: np.ufunc, member: np.ndarray) -> np.ndarray:
        """The member of each bucket that ``beats`` (``np.less``: the min) the others, NaN being none, in slot
        order: on a tie the first stays (not ``np.fmin``, whose vector form keeps the second of two zeros)."""
        best, *rest = self.columns(member, math.nan)
        for column in rest:
            best = np.where(beats(column, best) | np.isnan(best), column, best)
        return best


def _groups(sid: np.ndarray, bucket: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """For rows sorted by (sid, bucket): each row's group, the groups' first rows and their ends."""
    new = np.empty(len(sid), dtype=bool)
    new[0] = True
    np.not_equal(sid[1:], sid[:-1], out=new[1:])
    new[1:] |= bucket[1:] != bucket[:-1]
    group = np.cumsum(new) - 1
    starts = np.flatnonzero(new)
    return group, starts, np.append(starts[1:], len(sid))


def _first_level(sid: np.ndarray, step: np.ndarray, value: np.ndarray) -> _Level:
    first = LEVELS[0]
    group, starts, ends = _groups(sid, step >> first)
    grid = _Grid(len(starts), group, step & ((1 << first) - 1))
    finite = np.isfinite(value)
    # A bucket's sum starts at its first point's value (0.0 if that is not finite) and adds the
    # finite others in step order; -0.0 adds nothing, whatever the sum's sign.
    addend = np.where(finite, value, -0.0)
    addend[starts] = -0.0
    head = value[starts]
    total = np.where(np.isfinite(head), head, 0.0)
    with np.errstate(over="ignore", invalid="ignore"):
        for column in grid.columns(addend, -0.0):
            total = total + column
    total = _clamped(total)
    size = ends - starts
    nans = size - np.add.reduceat((~np.isnan(value)).astype(np.int64), starts)
    return _Level(first, sid[starts], step[starts] >> first, grid.fold(np.less, value), grid.fold(np.greater, value), total,
                  np.add.reduceat(finite.astype(np.int64), starts), nans, value[ends - 1], step[ends - 1])


def _clamped(total: np.ndarray) -> np.ndarray:
    """``clamp_sum`` of each sum."""
    return np.clip(total, -SUM_LIMIT, SUM_LIMIT)


def _or_none(column: np.ndarray) -> list[float | None]:
    """The floats, NaN as None (the stored NULL)."""
    out = column.astype(object)
    out[np.isnan(column)] = None
    return cast("list[float | None]", out.tolist())


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
