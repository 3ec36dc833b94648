"""The live stream's messages as the OpenAPI document declares them (docs/live.md).

Frames are encoded by hand, once per process (``live.frames``); these models only describe
their ``data``, for the document and for the tests that read real frames against them.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, Field

from runcast_server.reads.schemas import TimelineEvent, Value


class StreamPoints(BaseModel):
    """The points one batch stored for one key of one segment, as columns (steps ascending)."""

    key: str
    segment: int
    step: list[int]
    value: list[Value]


class _StreamRow(BaseModel):
    id: int
    segment: int
    step: int


class StreamSample(_StreamRow):
    """A sample the batch stored (its text: GET /runs/{id}/samples/{sample_id})."""

    key: str
    prompt_id: str


class StreamEval(_StreamRow):
    """An evaluation the batch stored (its scores: GET /runs/{id}/evals)."""

    suite: str
    task: str
    checkpoint: int | None


class StreamMedia(_StreamRow):
    """A media row the batch stored (its fields: GET /runs/{id}/media?key=)."""

    key: str
    kind: Literal["image", "table", "histogram"]


class StreamBatch(BaseModel):
    """``event: batch``: what one committed batch (run ``version``) stored."""

    run: str
    version: int
    status: Literal["running", "finished", "failed", "killed"]
    last_step: int | None
    points: list[StreamPoints]
    events: list[TimelineEvent] = Field(description="Timeline events, shaped as in GET /runs/{id}/events.")
    samples: list[StreamSample] = Field(description="Samples stored (none when the policy withholds them).")
    evals: list[StreamEval] = Field(description="Evaluations stored (none when the policy withholds them).")
    media: list[StreamMedia] = Field(description="Images, tables and histograms stored (none when withheld).")
    described: bool = Field(description="The batch changed the run's name, tags, group or notes (an SDK update): "
                                        "read GET /runs/{id} again.")


class StreamReset(BaseModel):
    """``event: reset``: reload through REST, then apply the batches after ``version``."""

    version: int
