"""One series of a run as an export reads it, and a page of it read as values alone (``export``, ``export_parquet``)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final

# PostgreSQL, for the connection or transaction that reads pages: a page's rows in step order come
# from the primary key's index, never from a sort. Without statistics (a new partition, or a
# series far larger than the planner estimates), a page of ``step > after ... LIMIT n`` read every
# point past ``after`` by bitmap scan and sorted them all to keep n: a million-point series'
# export took three times as long as eight series of the same points.
INDEX_ORDER_PG: Final = "enable_sort = off"


@dataclass(frozen=True)
class SeriesRef:
    id: int
    segment: int
    key: str
    upto: int | None = None  # only points of run versions up to this one (a delayed reader)
    times: int | None = None  # the segment's ``_timestamp`` series (None: its steps have no time)
    times_upto: int | None = None  # ``upto`` of that series


@dataclass(frozen=True)
class DensePage:
    """A page of consecutive steps from ``first``: one ``(value,)`` row each (NULL = NaN)."""

    first: int
    values: list[tuple[float | None]]
