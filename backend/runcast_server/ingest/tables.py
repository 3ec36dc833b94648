"""The tables the write path writes, as SQLAlchemy Core tables."""

from __future__ import annotations

from sqlalchemy import Table

from runcast_server.core.models import (
    Event,
    Point,
    Rollup,
    Run,
    RunVersion,
    Segment,
    Series,
)

RUNS: Table = Run.__table__  # type: ignore[assignment]
SEGMENTS: Table = Segment.__table__  # type: ignore[assignment]
SERIES: Table = Series.__table__  # type: ignore[assignment]
POINTS: Table = Point.__table__  # type: ignore[assignment]
ROLLUPS: Table = Rollup.__table__  # type: ignore[assignment]
EVENTS: Table = Event.__table__  # type: ignore[assignment]
RUN_VERSIONS: Table = RunVersion.__table__  # type: ignore[assignment]
