"""The run record's tables: runs, their segments, metric series and points, timeline events and
the run versions (SQLAlchemy 2, typed). Every domain reads them (policy and reads included), so
they sit below the domains, on ``core`` alone; the domains' own tables are in their ``models.py``.

A NaN metric value is stored as NULL in ``points.value`` and ``rollups.last`` (SQLite cannot
hold NaN); every other value is a float.
"""

from __future__ import annotations

from typing import Any

from sqlalchemy import (
    JSON,
    BigInteger,
    Boolean,
    Computed,
    Float,
    ForeignKey,
    Index,
    Integer,
    String,
    Text,
    UniqueConstraint,
    false,
)
from sqlalchemy.dialects.postgresql import JSONB
from sqlalchemy.orm import Mapped, mapped_column

from runcast_server.core.models import Base, BigId

# JSON that PostgreSQL stores parsed (jsonb); SQLite has one JSON type, text.
_JSONB = JSON().with_variant(JSONB(), "postgresql")


class Run(Base):
    __tablename__ = "runs"
    __table_args__ = (
        Index("ix_runs_project_created", "project_id", "created_at"),
        Index("ix_runs_created_id", "created_at", "id"),  # the list of all runs, newest first
    )

    id: Mapped[str] = mapped_column(String(64), primary_key=True)
    project_id: Mapped[int] = mapped_column(
        ForeignKey("projects.id", ondelete="CASCADE")
    )
    name: Mapped[str] = mapped_column(String(200))
    visibility: Mapped[str] = mapped_column(String(16), default="public")
    # The run opted in to showing its paths, host and pid to every reader (init(public_paths=True)).
    public_paths: Mapped[bool] = mapped_column(Boolean, default=False, server_default=false())
    status: Mapped[str] = mapped_column(String(16), default="running")
    config: Mapped[dict[str, Any]] = mapped_column(default=dict)
    code: Mapped[dict[str, Any]] = mapped_column(default=dict)
    env: Mapped[dict[str, Any]] = mapped_column(default=dict)
    seed: Mapped[int | None] = mapped_column(BigInteger)
    created_at: Mapped[float] = mapped_column(Float)
    started_at: Mapped[float | None] = mapped_column(Float)
    finished_at: Mapped[float | None] = mapped_column(Float)
    heartbeat_at: Mapped[float | None] = mapped_column(Float)
    last_step: Mapped[int | None] = mapped_column(BigInteger)
    # key -> [step, value] of the newest point of each metric (wire-encoded values).
    last_values: Mapped[dict[str, Any]] = mapped_column(default=dict)
    # Bumped once per committed ingest batch: the live stream's resume position.
    version: Mapped[int] = mapped_column(BigInteger, default=0)
    # From the first run_started (init(group=, job_type=, notes=)); tags live in run_tags.
    group_name: Mapped[str | None] = mapped_column(String(128), index=True)
    job_type: Mapped[str | None] = mapped_column(String(64))
    notes: Mapped[str | None] = mapped_column(Text)
    # Folded from the run's updates (run.summary, run.define_metric), in trainer order.
    summary: Mapped[dict[str, Any] | None] = mapped_column()
    metric_defs: Mapped[dict[str, Any] | None] = mapped_column()
    # Copies of config, summary and last_values made by the database (migration 0019): jsonb on
    # PostgreSQL, parsed once when written, for the run table's filters, sorts and aggregates
    # (runs/tablesql.py); virtual on SQLite. Deferred: a loaded run never reads them.
    config_jsonb: Mapped[dict[str, Any] | None] = mapped_column(_JSONB, Computed("config"), deferred=True)
    summary_jsonb: Mapped[dict[str, Any] | None] = mapped_column(_JSONB, Computed("summary"), deferred=True)
    last_values_jsonb: Mapped[dict[str, Any] | None] = mapped_column(_JSONB, Computed("last_values"), deferred=True)
    # Archived runs are left out of the run list unless asked for; still readable by id.
    archived_at: Mapped[float | None] = mapped_column(Float)
    # The run has commands not yet acknowledged or expired (commands/, migration 0022): only then
    # does an ingest batch look for commands to deliver in its answer.
    commands_pending: Mapped[bool] = mapped_column(Boolean, default=False, server_default=false())
    # PostgreSQL: the run's partitions and series ids (partitions.py); 0 = stored before
    # migration 0013 (legacy partitions), NULL = nothing stored yet, or SQLite.
    block: Mapped[int | None] = mapped_column(BigInteger)


class Segment(Base):
    """One ``init()`` of a run. A resume opens a new segment at ``start_step``."""

    __tablename__ = "segments"
    __table_args__ = (
        UniqueConstraint("run_id", "uid"),
        UniqueConstraint("run_id", "index", name="uq_segments_run_index"),
    )

    id: Mapped[int] = mapped_column(BigId, primary_key=True)
    run_id: Mapped[str] = mapped_column(ForeignKey("runs.id", ondelete="CASCADE"))
    uid: Mapped[str] = mapped_column(String(64))
    index: Mapped[int] = mapped_column(Integer)
    start_step: Mapped[int] = mapped_column(BigInteger, default=0)
    resumed: Mapped[bool] = mapped_column(Boolean, default=False)
    started_at: Mapped[float | None] = mapped_column(Float)
    # Events this segment's SDK reported it could not keep (a hole): the highest count reported.
    lost_events: Mapped[int] = mapped_column(BigInteger, default=0, server_default="0")
    # Events the trainer (finish() past its timeout) or `runcast sync` last reported waiting in
    # its local spool, and when: the server does not hold them yet.
    spooled_events: Mapped[int] = mapped_column(BigInteger, default=0, server_default="0")
    spooled_at: Mapped[float | None] = mapped_column(Float)


class Series(Base):
    """One metric of one segment: the unit that points and rollups belong to."""

    __tablename__ = "series"
    __table_args__ = (
        UniqueConstraint("segment_id", "key"),
        Index("ix_series_run_key", "run_id", "key"),
    )

    id: Mapped[int] = mapped_column(BigId, primary_key=True)
    run_id: Mapped[str] = mapped_column(ForeignKey("runs.id", ondelete="CASCADE"))
    segment_id: Mapped[int] = mapped_column(
        ForeignKey("segments.id", ondelete="CASCADE")
    )
    key: Mapped[str] = mapped_column(String(200))
    count: Mapped[int] = mapped_column(BigInteger, default=0)
    min_step: Mapped[int | None] = mapped_column(BigInteger)
    max_step: Mapped[int | None] = mapped_column(BigInteger)


class Point(Base):
    """One logged value. (series, step) is written once; a repeat is ignored."""

    __tablename__ = "points"
    # SQLite: the primary-key B-tree is the table, each row stored once (migration 0014).
    __table_args__ = {"sqlite_with_rowid": False}

    series_id: Mapped[int] = mapped_column(BigInteger, primary_key=True)
    step: Mapped[int] = mapped_column(BigInteger, primary_key=True)
    value: Mapped[float | None] = mapped_column(Float)  # NULL = NaN
    version: Mapped[int] = mapped_column(
        BigInteger
    )  # the run version of the batch that wrote it


class Event(Base):
    """A timeline event (everything but metrics and heartbeats), stored once per (segment, seq)."""

    __tablename__ = "events"
    __table_args__ = (
        UniqueConstraint("segment_id", "seq", name="uq_events_segment_seq"),
        Index("ix_events_run_type", "run_id", "type"),
    )

    id: Mapped[int] = mapped_column(BigId, primary_key=True)
    run_id: Mapped[str] = mapped_column(ForeignKey("runs.id", ondelete="CASCADE"))
    segment_id: Mapped[int] = mapped_column(
        ForeignKey("segments.id", ondelete="CASCADE")
    )
    seq: Mapped[int] = mapped_column(BigInteger)
    type: Mapped[str] = mapped_column(String(32))
    step: Mapped[int | None] = mapped_column(BigInteger)
    ts: Mapped[float] = mapped_column(Float)
    received_at: Mapped[float] = mapped_column(Float)
    # The run version of the batch that stored it (migration 0012); NULL before 0012, and for
    # an alert's anomaly event written outside a batch (policy/delay.py uses received_at then).
    version: Mapped[int | None] = mapped_column(BigInteger)
    payload: Mapped[dict[str, Any]] = mapped_column(default=dict)


class RunVersion(Base):
    """What one committed ingest batch (run ``version``) wrote: the live stream's replay log.

    ``ranges`` lists ``[series_id, first_step, last_step, count]`` of the points the
    batch inserted (points of that version lie in those primary-key ranges);
    ``event_ids`` the timeline events it inserted; ``outputs`` the ids of the samples, evals
    and media rows it inserted, by table (``{"samples": [...], ...}``; null when none,
    migration 0017); ``described`` whether it changed the run's name, tags, group or notes
    (an SDK ``update``; null before migration 0018). ``status`` and ``last_step`` are the
    run's as of this version.
    """

    __tablename__ = "run_versions"

    # No foreign key since 0013: attaching a run's partition would clone it, and that takes
    # SHARE ROW EXCLUSIVE on runs, waiting for every batch in flight. manage.delete_run clears it.
    run_id: Mapped[str] = mapped_column(String(64), primary_key=True)
    version: Mapped[int] = mapped_column(BigInteger, primary_key=True)
    status: Mapped[str] = mapped_column(String(16))
    last_step: Mapped[int | None] = mapped_column(BigInteger)
    committed_at: Mapped[float] = mapped_column(Float)
    points: Mapped[int] = mapped_column(BigInteger)
    ranges: Mapped[list[Any]] = mapped_column(JSON)
    event_ids: Mapped[list[Any]] = mapped_column(JSON)
    outputs: Mapped[dict[str, Any] | None] = mapped_column(JSON)
    described: Mapped[bool | None] = mapped_column(Boolean)
