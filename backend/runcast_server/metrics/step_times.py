"""The wall time of exported steps: for each step, the segment's last ``_timestamp`` point at or
before it (ingest keeps a step's time when it falls in a later tenth of a second than the last
kept one, ingest/points.py), read one page of steps at a time on a DB-API cursor.

A page's times are its time points (one per tenth of a second of training: few for a fast
loop, one a step for a step of a second or more), and each point covers the steps from its own
to the next one's; the exports use those runs of steps as they are (``time_runs``, or a NumPy
search for Parquet) instead of a lookup per step."""

from __future__ import annotations

from bisect import bisect_left
from collections.abc import Iterator, Sequence
from operator import itemgetter
from typing import Any

TimePoints = list[tuple[int, float]]  # (step, epoch seconds), ascending by step
_STEP = itemgetter(0)


def time_points_sql(series_id: int, lo: int, hi: int, upto: int | None) -> str:
    """The query of ``time_points`` (columns ``step``, ``value``), for a cursor that reads columns."""
    # The time point at or before ``lo``, and those up to ``hi``: a bounded read whatever the run's length.
    due = "" if upto is None else f" AND version <= {int(upto)}"  # a delayed reader (policy/delay.py)
    sid = int(series_id)
    return (
        f"SELECT step, value FROM points WHERE series_id = {sid}{due} AND step <= {int(hi)} AND step >= COALESCE("
        f"(SELECT MAX(step) FROM points WHERE series_id = {sid}{due} AND step <= {int(lo)}), {int(lo)}) ORDER BY step"
    )


def time_points(cursor: Any, series_id: int | None, upto: int | None, lo: int, hi: int) -> TimePoints:
    """The points of the ``_timestamp`` series ``series_id`` that time the steps ``lo..hi`` (none
    without a series): the last at or before ``lo``, then those up to ``hi``."""
    if series_id is None:
        return []
    cursor.execute(time_points_sql(series_id, lo, hi, upto))
    return [(int(s), float(v)) for s, v in cursor.fetchall()]


def time_runs(rows: Sequence[tuple[Any, ...]], points: TimePoints) -> Iterator[tuple[int, int, float | None]]:
    """``(start, end, time)`` for consecutive slices of ``rows`` (ascending by step, the step
    first): each slice's steps share one time; steps before the first point have none."""
    bounds = [bisect_left(rows, step, key=_STEP) for step, _ in points]
    starts = [0, *bounds]
    ends = [*bounds, len(rows)]
    times: list[float | None] = [None, *(at for _, at in points)]
    for start, end, at in zip(starts, ends, times, strict=True):
        if start < end:
            yield start, end, at
