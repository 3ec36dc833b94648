"""The tables the write path writes, as SQLAlchemy Core tables."""

from __future__ import annotations

from sqlalchemy import Table

from runcast_server.metrics.models import Rollup
from runcast_server.record.models import Event, Point, Run, Segment, Series

RUNS: Table = Run.__table__
SEGMENTS: Table = Segment.__table__
SERIES: Table = Series.__table__
POINTS: Table = Point.__table__
ROLLUPS: Table = Rollup.__table__
EVENTS: Table = Event.__table__
