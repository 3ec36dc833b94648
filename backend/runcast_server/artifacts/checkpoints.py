"""Checkpoints of a run, from its checkpoint events, and their status for a viewer.

A checkpoint is identified by the id of the event that recorded it as available
(``cid``). A later event with ``status: "pruned"`` for the same (path, step) marks it
pruned (the trainer's retention deleted the file; the metadata stays). An event
that records a new checkpoint at a path already used marks the older one as
overwritten. Status for a viewer, in this order:

``private``    recorded with ``public: false`` and the caller has no token of the run's project:
               listed without its file (no file name, size or sha256), never downloadable
``pruned``     the trainer reported the file deleted
``missing``    the file cannot be served: outside the project's directory of the storage
               root, refused by the path rules, gone, overwritten, or not the recorded size
               (``reason`` says which, and nothing about any file outside the project's directory)
``available``  downloadable (a directory checkpoint as one streamed tar, or file by file)
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal

from sqlalchemy import select
from sqlalchemy.orm import Session

from runcast_server.artifacts.storage import (
    NotStored,
    Storage,
    StoredObject,
    UnsafePath,
)
from runcast_server.core.models import Project
from runcast_server.policy.delay import Horizon
from runcast_server.record.models import Event, Run, Segment

Status = Literal["available", "pruned", "private", "missing"]


@dataclass
class CheckpointRecord:
    id: int
    segment: int
    seq: int
    step: int
    path: str
    size: int
    sha256: str | None
    metrics: dict[str, Any]
    public: bool
    ts: float
    pruned_at: float | None = None
    overwritten_by: int | None = None
    extra: dict[str, Any] = field(default_factory=dict)


@dataclass
class CheckpointView:
    record: CheckpointRecord
    status: Status
    reason: str | None
    stored: StoredObject | None

    @property
    def downloadable(self) -> bool:
        return self.status == "available" and self.stored is not None


def load_checkpoints(session: Session, run_id: str, horizon: Horizon | None = None) -> list[CheckpointRecord]:
    """Every checkpoint of the run, ordered by segment index, step and id (``horizon``: those
    due to a delayed reader, policy/delay.py)."""
    query = (
        select(Event.id, Event.seq, Event.ts, Event.step, Event.payload, Segment.index)
        .join(Segment, Segment.id == Event.segment_id)
        .where(Event.run_id == run_id, Event.type == "checkpoint")
    )
    if horizon is not None:
        query = query.where(horizon.events_due())
    rows = session.execute(query.order_by(Event.id)).all()
    records: list[CheckpointRecord] = []
    live: dict[tuple[str, int], CheckpointRecord] = {}  # (path, step) -> newest available record
    by_path: dict[str, CheckpointRecord] = {}
    for event_id, seq, ts, event_step, payload, segment in rows:
        p = payload or {}
        path, step = str(p.get("path", "")), int(event_step or 0)
        if p.get("status") == "pruned":
            target = live.get((path, step))
            if target is not None and target.pruned_at is None:
                target.pruned_at = ts
                continue
            if target is not None:
                continue  # pruned twice: nothing new
        record = CheckpointRecord(
            id=event_id,
            segment=segment,
            seq=seq,
            step=step,
            path=path,
            size=int(p.get("size") or 0),
            sha256=p.get("sha256"),
            metrics=dict(p.get("metrics") or {}),
            public=bool(p.get("public", True)),
            ts=ts,
            pruned_at=ts if p.get("status") == "pruned" else None,
        )
        if record.pruned_at is None:
            older = by_path.get(path)
            if older is not None and older.pruned_at is None and older.overwritten_by is None:
                older.overwritten_by = record.id
            by_path[path] = record
            live[(path, step)] = record
        records.append(record)
    records.sort(key=lambda r: (r.segment, r.step, r.id))
    return records


def may_see_private(run: Run, viewer: Project | None) -> bool:
    return viewer is not None and viewer.id == run.project_id


def view(record: CheckpointRecord, storage: Storage, *, project: str, private_ok: bool) -> CheckpointView:
    """The record's status for a viewer (``private_ok``: holds a token of the run's project).

    Only files under ``<storage root>/<project>/`` are looked at: a checkpoint event can
    never make another project's file servable, nor tell whether one exists.
    """
    if not record.public and not private_ok:
        return CheckpointView(record, "private", "needs a token of the run's project", None)
    if record.pruned_at is not None:
        return CheckpointView(record, "pruned", "deleted by the trainer's retention", None)
    if record.overwritten_by is not None:
        return CheckpointView(record, "missing", f"overwritten by checkpoint {record.overwritten_by}", None)
    try:
        stored = storage.locate(record.path, within=project)
    except UnsafePath as exc:
        return CheckpointView(record, "missing", f"refused: {exc}", None)
    except NotStored as exc:
        return CheckpointView(record, "missing", str(exc), None)
    if not stored.is_dir and stored.size != record.size:
        return CheckpointView(record, "missing", "the file is no longer the recorded size", None)
    return CheckpointView(record, "available", None, stored)


def filename_for(record: CheckpointRecord, stored: StoredObject | None) -> str:
    name = stored.name if stored is not None else record.path.replace("\\", "/").rsplit("/", 1)[-1]
    return name or f"checkpoint-{record.step}"


def as_json(v: CheckpointView, run_id: str) -> dict[str, Any]:
    r = v.record
    base = f"/api/v1/runs/{run_id}/checkpoints/{r.id}"
    if v.status == "private":  # another project's viewer: that it exists, at which step; not its file
        return {
            "id": r.id, "step": r.step, "segment": r.segment, "status": "private", "reason": v.reason,
            "size": None, "sha256": None, "metrics": r.metrics, "public": False, "filename": None,
            "kind": None, "recorded_at": r.ts, "pruned_at": None, "download_url": None, "card_url": None,
            "files_url": None,
        }
    return {
        "id": r.id,
        "step": r.step,
        "segment": r.segment,
        "status": v.status,
        "reason": v.reason,
        "size": r.size,
        "sha256": r.sha256,
        "metrics": r.metrics,
        "public": r.public,
        "filename": filename_for(r, v.stored),
        "kind": "directory" if v.stored is not None and v.stored.is_dir else "file",
        "recorded_at": r.ts,
        "pruned_at": r.pruned_at,
        "download_url": f"{base}/download" if v.downloadable else None,
        "card_url": f"{base}/card",
        "files_url": f"{base}/files" if v.downloadable and v.stored is not None and v.stored.is_dir else None,
    }
