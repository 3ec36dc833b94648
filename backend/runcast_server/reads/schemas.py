"""Response models of the read API (separate from the SQLAlchemy tables).

Metric values are wire-encoded: finite floats as numbers, NaN and +-Inf as the
strings "NaN", "Infinity", "-Infinity"; null where an aggregate has no value.
"""

from __future__ import annotations

from typing import Any, Final, Literal

from pydantic import BaseModel, Field

MAX_SEGMENT: Final = 2**31 - 1  # segments.index is a 32-bit column
Value = float | str | None
RunStatus = Literal["running", "finished", "failed", "killed", "stalled"]
TimelineType = Literal[
    "run_started", "checkpoint", "data_mix", "manifest", "note", "finished", "anomaly"
]


class LastValue(BaseModel):
    step: int
    value: Value


class RunSummary(BaseModel):
    id: str
    project: str
    name: str
    status: RunStatus
    visibility: Literal["public", "unlisted", "private"]
    created_at: float
    started_at: float | None
    finished_at: float | None
    heartbeat_at: float | None
    heartbeat_age_s: float | None = Field(
        description="Seconds since the last heartbeat, at response time."
    )
    last_step: int | None
    last_values: dict[str, LastValue] = Field(
        description="The newest point of each metric."
    )


class RunList(BaseModel):
    runs: list[RunSummary]
    next_cursor: str | None = Field(
        description="Pass as ?cursor= for the next page; null on the last page."
    )


class SegmentInfo(BaseModel):
    index: int
    start_step: int
    resumed: bool
    started_at: float | None
    last_step: int | None
    lost_events: int = Field(0, description="Events this segment's SDK reported it could not keep.")


class RunDetail(RunSummary):
    config: dict[str, Any]
    code: dict[str, Any]
    env: dict[str, Any]
    # The run shows its paths, host and pid to every reader; otherwise they are "[withheld]"
    # except for a token of its project.
    public_paths: bool = False
    seed: int | None
    keys: list[str]
    segments: list[SegmentInfo]
    lost_events: int = Field(
        0, description="Events the trainer's SDK could not keep (e.g. its disk was full): a hole in the run. 0 normally."
    )


class MetricSeries(BaseModel):
    """One segment's buckets as columns: entry i of every list describes bucket i."""

    segment: int
    start_step: int
    step: list[int]
    last_step: list[int]
    min: list[Value]
    max: list[Value]
    mean: list[Value]
    last: list[Value]
    count: list[int]


class MetricsResponse(BaseModel):
    run: str
    key: str
    version: int = Field(
        description="The run version this answer reflects: every batch up to it and none after"
        " (the live stream's message ids); apply the stream's messages after it."
    )
    level: int = Field(description="log2 of the bucket width; 0 = raw points.")
    bucket_width: int
    series: list[MetricSeries]


class TimelineEvent(BaseModel):
    id: int
    type: str
    segment: int
    seq: int
    step: int | None
    ts: float
    received_at: float
    payload: dict[str, Any]


class EventList(BaseModel):
    events: list[TimelineEvent]
    next_cursor: str | None = Field(
        description="Pass as ?after= for the next page; null on the last page."
    )
