"""The ingest body as the OpenAPI document shows it.

The route reads and checks the body itself with ``runcast.events`` (strict JSON, one error
naming the field and the event's index), not through FastAPI; this schema only documents it.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field
from runcast.events import EVENT_TYPES, ID_RE, MAX_BATCH_EVENTS, MAX_SEQ, MAX_TS


class WireEvent(BaseModel):
    """An event's envelope; the fields of each type are in runcast.events (validated there)."""

    model_config = ConfigDict(extra="allow")
    v: Literal[1] = 1
    # A Literal over runcast.events' runtime tuple, so the types are listed once (pydantic
    # reads it at runtime; a type checker wants the values spelled out).
    type: Literal[EVENT_TYPES]  # type: ignore[valid-type]
    run: str = Field(pattern=ID_RE.pattern)
    segment: str = Field(pattern=ID_RE.pattern)
    seq: int = Field(ge=0, le=MAX_SEQ)
    ts: float = Field(ge=0, le=MAX_TS)


class Batch(BaseModel):
    """The body: at most MAX_BATCH_EVENTS events, MAX_BATCH_BYTES bytes."""

    v: Literal[1] = 1
    events: list[WireEvent] = Field(min_length=1, max_length=MAX_BATCH_EVENTS)


_BATCH_SCHEMA = Batch.model_json_schema()
_BATCH_SCHEMA["properties"]["events"]["items"] = _BATCH_SCHEMA.pop("$defs")["WireEvent"]  # inline: self-contained
BODY_DOC: dict[str, Any] = {"requestBody": {"required": True, "content": {"application/json": {"schema": _BATCH_SCHEMA}}}}
