"""What the read API answers, as dataclasses: a run's summary, its segments, checkpoints and alerts.

Each ``from_json`` takes the route's answer as documented (docs/api.md) and keeps the fields a
script uses; ``raw`` holds the whole answer for the rest.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class RunInfo:
    """One entry of ``GET /runs`` (and the head of ``GET /runs/{id}``)."""

    id: str
    project: str
    name: str
    status: str
    visibility: str
    created_at: float
    started_at: float | None
    finished_at: float | None
    heartbeat_at: float | None
    last_step: int | None
    tags: list[str]
    group: str | None
    job_type: str | None
    archived_at: float | None
    last_values: dict[str, Any] = field(repr=False)

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> RunInfo:
        return cls(
            id=d["id"], project=d["project"], name=d["name"], status=d["status"], visibility=d["visibility"],
            created_at=d["created_at"], started_at=d.get("started_at"), finished_at=d.get("finished_at"),
            heartbeat_at=d.get("heartbeat_at"), last_step=d.get("last_step"), tags=list(d.get("tags") or []),
            group=d.get("group"), job_type=d.get("job_type"), archived_at=d.get("archived_at"),
            last_values={k: v.get("value") for k, v in (d.get("last_values") or {}).items()},
        )


@dataclass(frozen=True)
class Segment:
    """One start of the run (``init``, then each resume); a resumed one begins at ``start_step``."""

    index: int
    start_step: int
    resumed: bool
    started_at: float | None
    last_step: int | None

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> Segment:
        return cls(index=d["index"], start_step=d["start_step"], resumed=d["resumed"],
                   started_at=d.get("started_at"), last_step=d.get("last_step"))


@dataclass(frozen=True)
class Checkpoint:
    """One checkpoint of ``GET /runs/{id}/checkpoints``; ``status`` ``available`` can be downloaded."""

    id: int
    step: int
    segment: int
    status: str
    filename: str | None
    size: int | None
    sha256: str | None
    metrics: dict[str, Any]
    public: bool
    recorded_at: float
    raw: dict[str, Any] = field(repr=False)

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> Checkpoint:
        return cls(id=d["id"], step=d["step"], segment=d["segment"], status=d["status"], filename=d.get("filename"),
                   size=d.get("size"), sha256=d.get("sha256"), metrics=dict(d.get("metrics") or {}),
                   public=d["public"], recorded_at=d["recorded_at"], raw=d)


@dataclass(frozen=True)
class Alert:
    """One alert of ``GET /runs/{id}/alerts`` (docs/alerts.md)."""

    id: int
    kind: str
    title: str
    key: str | None
    state: str
    step: int | None
    end_step: int | None
    opened_at: float
    closed_at: float | None
    evidence: dict[str, Any]
    raw: dict[str, Any] = field(repr=False)

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> Alert:
        return cls(id=d["id"], kind=d["kind"], title=d["title"], key=d.get("key"), state=d["state"],
                   step=d.get("step"), end_step=d.get("end_step"), opened_at=d["opened_at"],
                   closed_at=d.get("closed_at"), evidence=dict(d.get("evidence") or {}), raw=d)
