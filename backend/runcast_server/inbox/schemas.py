"""Response models of the admin inbox API (``/api/v1/admin/inbox``).

``extra="forbid"``: a key the code returns but a model lacks fails validation.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field


class _Answer(BaseModel):
    model_config = ConfigDict(extra="forbid")


class InboxStats(_Answer):
    """Rows per state, and stored batches whose detectors failed."""

    states: dict[str, int] = Field(description="pending, stored, done, quarantined -> rows.")
    detector_errors: int


class InboxRowView(_Answer):
    """One inbox row (without its body)."""

    id: int
    project: str | None
    state: str
    events: int
    received_at: float
    attempts: int
    sweeps: int
    error: str | None
    bad_events: list[dict[str, Any]] = Field(description="{index, error} of each event that could not be stored.")
    detector_error: str | None


class InboxPage(_Answer):
    """A page of inbox rows, oldest first."""

    rows: list[InboxRowView]
    next_cursor: str | None = Field(description="Pass as ?after= for the next page; null on the last page.")


class InboxRowDetail(InboxRowView):
    """One row, with the body's size; each bad event also carries its ``event`` (clipped text) when the body is kept."""

    body_bytes: int | None


class InboxRetry(_Answer):
    """A retried row: pending again, sent to the worker."""

    id: int
    state: str
