"""The wall time of exported steps: for each step, the segment's last ``_timestamp`` point at or
before it (ingest keeps a step's time when it falls in a later tenth of a second than the last
kept one, ingest/points.py), read one page of steps at a time on a DB-API cursor."""

from __future__ import annotations

from bisect import bisect_right
from collections.abc import Sequence
from typing import Any


def _sql(series_id: int, lo: int, hi: int, upto: int | None) -> str:
    # The time point at or before ``lo``, and those up to ``hi``: a bounded read whatever the run's length.
    due = "" if upto is None else f" AND version <= {int(upto)}"  # a delayed reader (policy/delay.py)
    sid = int(series_id)
    return (
        f"SELECT step, value FROM points WHERE series_id = {sid}{due} AND step <= {int(hi)} AND step >= COALESCE("
        f"(SELECT MAX(step) FROM points WHERE series_id = {sid}{due} AND step <= {int(lo)}), {int(lo)}) ORDER BY step"
    )


def page_times(cursor: Any, series_id: int | None, upto: int | None, steps: Sequence[int]) -> list[float | None]:
    """The times of ``steps`` (ascending) from the ``_timestamp`` series ``series_id`` (None: no
    times, every entry None); a step before the first time point has none."""
    if series_id is None or not steps:
        return [None] * len(steps)
    cursor.execute(_sql(series_id, steps[0], steps[-1], upto))
    known = cursor.fetchall()
    at = [int(s) for s, _ in known]
    values = [float(v) for _, v in known]
    out: list[float | None] = []
    for step in steps:
        i = bisect_right(at, step)
        out.append(values[i - 1] if i else None)
    return out
