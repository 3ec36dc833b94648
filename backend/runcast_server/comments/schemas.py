"""Comment bodies and answers of the API (docs/comments.md, docs/api.md)."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field
from runcast.wire.limits import MAX_STEP

from runcast_server.comments.anchors import AnchorIn, AnchorKind

MAX_BODY = 10_000


class CommentIn(BaseModel):
    """A new thread (``anchor``) or a reply (``parent``): exactly one of them."""

    # The rule the route checks, in the schema (inside allOf: a client generator would read a top-level
    # oneOf as alternative bodies).
    model_config = ConfigDict(json_schema_extra={"allOf": [{"oneOf": [
        {"required": ["anchor"], "properties": {"anchor": {"type": "object"}}},
        {"required": ["parent"], "properties": {"parent": {"type": "integer", "minimum": 1, "maximum": MAX_STEP}}},
    ]}]})

    body: str = Field(min_length=1, max_length=MAX_BODY, description="Markdown (rendered and sanitized by the server).")
    anchor: AnchorIn | None = Field(default=None, description="Where a new thread is anchored.")
    # Bounded by the largest integer a JSON number holds exactly (MAX_STEP = 2**53 - 1): a bound of 2**63 - 1
    # compares equal to 2**63 as a float, so a schema-valid 9223372036854776000 was refused (schemathesis).
    parent: int | None = Field(default=None, ge=1, le=MAX_STEP, description="The comment this one replies to (its thread).")


class CommentEdit(BaseModel):
    body: str = Field(min_length=1, max_length=MAX_BODY, description="The new Markdown text.")


class ModerationIn(BaseModel):
    """The team's changes (absent: unchanged); ``pinned`` and ``locked`` apply to a thread's first comment."""

    pinned: bool | None = None
    locked: bool | None = None
    hidden: bool | None = None
    approved: bool | None = Field(default=None, description="true: a held comment becomes visible.")


class ReportIn(BaseModel):
    reason: str = Field(default="", max_length=500, description="Why the comment should be looked at.")


class HoldIn(BaseModel):
    hold: bool = Field(description="Hold new comments (but the team's) until the team approves them.")


class Author(BaseModel):
    name: str
    display_name: str


class AnchorOut(BaseModel):
    kind: AnchorKind
    key: str | None
    id: int | None
    step: int | None = Field(description="Where the anchor stands on the chart (its marker).")


class CommentOut(BaseModel):
    """A comment as its reader may see it: ``html`` is sanitized; ``body`` (the Markdown source) is
    given to its author and the team only."""

    id: int
    parent: int | None = Field(description="The thread's first comment; null: this comment starts a thread.")
    author: Author | None = Field(description="null: written with a team token.")
    team: bool = Field(description="The team's answer (a member's or an owner's, or a team token's).")
    anchor: AnchorOut
    html: str
    body: str | None
    state: Literal["visible", "held", "hidden", "deleted"]
    pinned: bool
    locked: bool
    mine: bool
    created_at: float
    edited_at: float | None
    reports: int | None = Field(description="How many people reported it (the team only; else null).")


class CommentList(BaseModel):
    run: str
    hold: bool
    signed_in: bool = Field(description="The caller may comment (a signed-in person, or a team token of the run).")
    moderator: bool = Field(description="The caller moderates this run's comments (the team).")
    comments: list[CommentOut] = Field(description="Threads in order (pinned first), each followed by its replies.")


class ReportOut(BaseModel):
    comment: int
    reporter: str
    reason: str
    created_at: float


class ReportList(BaseModel):
    run: str
    reports: list[ReportOut]


class VersionOut(BaseModel):
    body: str
    created_at: float


class VersionList(BaseModel):
    comment: int
    versions: list[VersionOut] = Field(description="Earlier texts, oldest first (before each edit or delete).")
