"""Rollup levels and bucket math, shared by the ingest writer and the metrics reader.

A rollup at ``level`` L aggregates the aligned bucket ``[b * 2**L, (b + 1) * 2**L)``
of steps. Bucket edges depend only on the step, never on the data, so a new point
or a reload never moves an edge. Stored levels grow by a factor of 8, which keeps
the rollup rows at 1/7 of the points and lets any query read at most 4 rows per
bucket it returns.
"""

from __future__ import annotations

from typing import Final

LEVELS: Final = (3, 6, 9, 12, 15, 18, 21, 24)
