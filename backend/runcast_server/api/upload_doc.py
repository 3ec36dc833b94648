"""The body of ``POST /runs/{id}/uploads`` (begin a checkpoint upload) as the OpenAPI document
states it; ``artifacts.uploads`` checks the body itself (``check_manifest``, then the checkpoint
event through ``runcast.wire.events``).

Left to that check, which JSON Schema cannot state: a file checkpoint's one entry is named like
the checkpoint; no path is listed twice or is both a file and a directory; the sizes stay
within the server's upload limits (413) and their sum within 64 bits; lengths in bytes; an integer
written without a fraction.
"""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field
from runcast.wire.events import MAX_METRICS_PER_EVENT, MAX_SEQ, MAX_TS, SHA256_RE

from runcast_server.api.ingest_doc import Count, MetricName, Step, WireValue
from runcast_server.artifacts.uploads import MAX_NAME_BYTES, MAX_PATH_BYTES, NAME_PATTERN, RELATIVE_PATH_PATTERN


class UploadFileEntry(BaseModel):
    """One file of the checkpoint, by its path relative to the checkpoint."""

    model_config = ConfigDict(regex_engine="python-re")  # the patterns look ahead

    path: Annotated[str, Field(max_length=MAX_PATH_BYTES, pattern=RELATIVE_PATH_PATTERN)]
    size: Count
    sha256: Annotated[str, Field(pattern=SHA256_RE.pattern)]


class UploadBegin(BaseModel):
    """A checkpoint to publish: its manifest and its checkpoint event's fields (an integer written
    without a fraction: ``2``, not ``2.0``)."""

    model_config = ConfigDict(extra="allow", regex_engine="python-re")
    segment: str = Field(description="The run's segment (its run_started stored): else 404.")
    seq: Annotated[int, Field(ge=0, le=MAX_SEQ)]
    ts: Annotated[float, Field(ge=0, le=MAX_TS)]
    step: Step
    name: Annotated[str, Field(max_length=MAX_NAME_BYTES, pattern=NAME_PATTERN)]
    kind: Literal["file", "directory"] = Field(description="A file checkpoint lists one file, named like it.")
    files: Annotated[list[UploadFileEntry], Field(min_length=1)]
    metrics: Annotated[
        dict[MetricName, WireValue], Field(max_length=MAX_METRICS_PER_EVENT)  # type: ignore[valid-type]
    ] | None = None
    public: bool = True
    path: str | None = Field(None, description="The trainer's path: where the server may find the bytes in place.")
