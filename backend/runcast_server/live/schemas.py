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


class StreamComments(BaseModel):
    """``event: comments`` (no ``id``): the run's comments changed; read GET /runs/{id}/comments again
    (it applies the reader's rights and the run's policy; the message carries no text)."""

    run: str
    comment: int = Field(description="The comment that changed.")
    change: Literal["new", "edited", "deleted", "moderated"]


class StreamReports(BaseModel):
    """``event: reports`` (no ``id``): a report of the run was published or unpublished; read
    GET /runs/{id}/reports again (docs/reports.md)."""

    run: str
    report: int = Field(description="The report's number.")
    change: Literal["published", "unpublished"]


class StreamCommands(BaseModel):
    """``event: commands`` (no ``id``): a command of the run was sent or resolved (acknowledged); read
    GET /runs/{id}/commands and the timeline again (they apply the run's policy; the message carries no text)."""

    run: str
    command: str = Field(description="The command's id (cmd_...).")
    change: Literal["sent", "resolved"]


class StreamReset(BaseModel):
    """``event: reset``: reload through REST, then apply the batches after ``version``."""

    version: int


_FINGERPRINT = Field(description="The fingerprint of what shaped the messages (publication policy, piece size): "
                                 "piece URLs carry it as ?policy=; when it changes, reload.")


class BroadcastPiece(BaseModel):
    """A sealed piece: the ``batch`` messages of versions ``first_version .. last_version`` (immutable)."""

    run: str
    piece: int
    first_version: int
    last_version: int
    policy: str = _FINGERPRINT
    messages: list[StreamBatch] = Field(description="As the stream sends them, in version order; a version "
                                                    "that stored nothing (a policy change) has none.")


class BroadcastEdge(BaseModel):
    """The live edge: the highest version the caller may see and the messages after the last sealed piece."""

    run: str
    version: int = Field(description="The highest run version the caller may see (a delayed run: the last one due).")
    status: Literal["running", "finished", "failed", "killed"]
    last_step: int | None
    piece_versions: int = Field(description="P: piece n holds versions n*P+1 .. (n+1)*P.")
    last_piece: int | None = Field(description="The last sealed piece (version // P - 1); null before the first.")
    policy: str = _FINGERPRINT
    messages: list[StreamBatch] = Field(description="The versions after the last sealed piece, up to `version`.")
