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
    "run_started", "checkpoint", "data_mix", "manifest", "note", "finished", "anomaly", "command"
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
    tags: list[str] = Field(default_factory=list, description="The run's tags (init(tags=[...]), or given later), sorted.")
    group: str | None = Field(None, description="The run's group (init(group=...)), e.g. one sweep or one job.")
    job_type: str | None = Field(None, description="init(job_type=...), e.g. train or eval.")
    archived_at: float | None = Field(
        None, description="When the run's project archived it (left out of the run list by default); null if not."
    )
    values: dict[str, Any] = Field(
        default_factory=dict,
        description="The run list's ?column= of config, summary and metric keys: each one the run has and "
        "the reader may see, by column name (a metric's is its last value).",
    )


class Aggregate(BaseModel):
    min: float | None
    mean: float | None
    max: float | None


class RunGroup(BaseModel):
    group: str | None = Field(description="The runs' group; null for runs without one.")
    count: int
    aggregates: dict[str, Aggregate] = Field(
        description="min, mean and max of each ?column= over the group's runs that have a number there "
        "(a column without any is left out)."
    )


class TableKeys(BaseModel):
    config: list[str]
    summary: list[str]
    metric: list[str]


class RunList(BaseModel):
    runs: list[RunSummary]
    next_cursor: str | None = Field(
        description="Pass as ?cursor= for the next page; null on the last page (and with ?sort=: see next_offset)."
    )
    next_offset: int | None = Field(
        None, description="With ?sort=: pass as ?offset= for the next page; null on the last page."
    )
    as_of: float | None = Field(
        None, description="With ?sort= or ?group_by=: the listing's moment; pass it as ?as_of= with each next_offset."
    )
    groups: list[RunGroup] | None = Field(
        None, description="With ?group_by=group: every group of the matching runs (not only this page's), by name."
    )
    keys: TableKeys | None = Field(
        None, description="With ?keys=true: the config, summary and metric keys of this page's runs, sorted."
    )


class SegmentInfo(BaseModel):
    index: int
    start_step: int
    resumed: bool
    started_at: float | None
    last_step: int | None = Field(description="The highest step the training logged in this segment; null if none. "
                                  "System metrics (system/..., stepped by wall-clock second) do not count.")
    lost_events: int = Field(0, description="Events this segment's SDK reported it could not keep.")
    spooled_events: int = Field(
        0, description="Events the trainer last reported waiting in its local spool for `runcast sync` (not stored yet)."
    )
    spooled_at: float | None = Field(None, description="When the trainer or `runcast sync` last reported its spool.")


class Publication(BaseModel):
    """What the public sees of the run (docs/api.md#publication-policy): the policy in force
    and its departures from everything-public, so a page can say what is withheld."""

    policy: dict[str, Any]
    withheld: dict[str, Any]


VERSION_READ = ("The run version this answer reflects: it holds every batch up to it (a delayed reader's: the "
                "delay's horizon). A client following the stream applies the messages after it (docs/live.md).")


class RunDetail(RunSummary):
    version: int = Field(0, description=VERSION_READ)
    config: dict[str, Any]
    code: dict[str, Any]
    env: dict[str, Any]
    # The run shows its paths, host and pid to every reader; otherwise they are "[withheld]"
    # except for a token of its project.
    public_paths: bool = False
    seed: int | None
    keys: list[str] = Field(description="The metrics logged, sorted (not the server's step times, `_timestamp`: read them by name).")
    segments: list[SegmentInfo]
    notes: str | None = Field(None, description="init(notes=...).")
    summary: dict[str, Any] = Field(
        default_factory=dict,
        description="run.summary as set by the trainer, plus for each metric declared with a summary"
        " (min, max, last) that figure over every point stored; a value the trainer set wins.",
    )
    metrics: dict[str, dict[str, str]] = Field(
        default_factory=dict, description="Declared metrics (run.define_metric): name -> {x, summary}."
    )
    lost_events: int = Field(
        0, description="Events the trainer's SDK could not keep (e.g. its disk was full): a hole in the run. 0 normally."
    )
    spooled_events: int = Field(
        0, description="Events of the run waiting in the trainer's local spool (every segment's `spooled_events`): "
        "logged, not stored yet; they arrive with `runcast sync`. 0 normally."
    )
    publication: Publication | None = Field(None, description="The run's public policy and what it withholds.")


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
    version: int = Field(0, description=VERSION_READ)
