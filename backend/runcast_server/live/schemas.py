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


class StreamBatch(BaseModel):
    """``event: batch``: what one committed batch (run ``version``) stored."""

    run: str
    version: int
    status: Literal["running", "finished", "failed", "killed"]
    last_step: int | None
    points: list[StreamPoints]
    events: list[TimelineEvent] = Field(description="Timeline events, shaped as in GET /runs/{id}/events.")


class StreamReset(BaseModel):
    """``event: reset``: reload through REST, then apply the batches after ``version``."""

    version: int
