"""Test data through the real write path: wire events validated and stored by ``store_batch``.

``TrainerSim`` numbers events per segment like the SDK does; every ``send`` is one
batch (one transaction). ``received_at`` sets the server time of a batch, which is
the run's ``created_at`` and ``heartbeat_at``.
"""

from __future__ import annotations

import hashlib
import math
import time
from collections.abc import Callable, Iterable, Mapping
from contextlib import AbstractContextManager
from typing import Any

from runcast.wire import events as ev
from runcast_server.core.auth import create_token
from runcast_server.ingest.store import store_batch
from runcast_server.core.models import Project
from runcast_server.outputs.models import Blob
from sqlalchemy import select
from sqlalchemy.orm import Session

BATCH = 1000

OpenSession = Callable[[], AbstractContextManager[Session]]


def hold_blob(session: Session, project_id: int, data: bytes, *, content_type: str = "image/png",
              width: int = 1, height: int = 1) -> str:
    """Record that ``project_id`` holds ``data`` as a blob (what PUT /runs/{id}/blobs/{sha256} leaves);
    returns its SHA-256, the ``blob`` of an image event."""
    sha = hashlib.sha256(data).hexdigest()
    session.add(Blob(project_id=project_id, sha256=sha, size=len(data), content_type=content_type, width=width,
                     height=height, created_at=time.time()))
    return sha


def project_token(session: Session, project: str) -> tuple[str, int]:
    """A fresh token for ``project`` (created if missing) and the project's id."""
    token = create_token(session, project, label="tests")
    project_id = session.scalar(select(Project.id).where(Project.name == project))
    assert project_id is not None
    return token, project_id


class TrainerSim:
    """One run as a trainer would send it; each batch is stored and committed by ``open_session``."""

    def __init__(
        self,
        open_session: OpenSession,
        project_id: int,
        project: str,
        *,
        name: str = "run",
        run_id: str | None = None,
    ) -> None:
        self.open_session = open_session
        self.project_id = project_id
        self.project = project
        self.name = name
        self.run = run_id or ev.new_id()
        self.segment = ev.new_id()
        self.seq = 0

    def event(self, event_type: str, /, **fields: Any) -> dict[str, Any]:
        """One wire event of this segment, validated (``fields`` may hold ``kind``: a media event's)."""
        raw = {
            "v": ev.SCHEMA_VERSION,
            "type": event_type,
            "run": self.run,
            "segment": self.segment,
            "seq": self.seq,
            "ts": fields.pop("ts", time.time()),
            **fields,
        }
        self.seq += 1
        return ev.validate_event(ev.encode_event(raw))

    def send(
        self, events: Iterable[dict[str, Any]], received_at: float | None = None
    ) -> None:
        batch = list(events)
        for i in range(0, len(batch), BATCH):
            with self.open_session() as session:
                store_batch(
                    session,
                    self.project_id,
                    batch[i : i + BATCH],
                    received_at=received_at,
                )

    def start(
        self,
        *,
        visibility: str = "public",
        resume_step: int | None = None,
        received_at: float | None = None,
        ts: float | None = None,
        **fields: Any,
    ) -> TrainerSim:
        """Send run_started for the current segment."""
        started = self.event(
            "run_started",
            project=self.project,
            name=self.name,
            visibility=visibility,
            resume_step=resume_step,
            ts=ts if ts is not None else (received_at or time.time()),
            **fields,
        )
        self.send([started], received_at)
        return self

    def resume(self, step: int, **kwargs: Any) -> TrainerSim:
        """Open a new segment at ``step`` (a restart from a checkpoint)."""
        self.segment = ev.new_id()
        self.seq = 0
        return self.start(resume_step=step, **kwargs)

    def log(
        self,
        points: Mapping[str, Iterable[tuple[int, float]]],
        received_at: float | None = None,
        ts0: float | None = None,
    ) -> None:
        """Log ``key -> [(step, value), ...]``, one metrics event per step (``ts0``: step s was
        logged at ``ts0 + s``; default: now)."""
        by_step: dict[int, dict[str, float]] = {}
        for key, rows in points.items():
            for step, value in rows:
                by_step.setdefault(step, {})[key] = value
        self.send(
            (
                self.event("metrics", step=s, values=v, **({} if ts0 is None else {"ts": ts0 + s}))
                for s, v in sorted(by_step.items())
            ),
            received_at,
        )

    def sample(self, step: int, prompt_id: str, output: str, *, prompt: str = "a prompt", key: str = "samples",
               **fields: Any) -> dict[str, Any]:
        """A ``sample`` event (``fields``: reference, scores, settings)."""
        return self.event("sample", step=step, key=key, prompt_id=prompt_id, prompt=prompt, output=output, **fields)

    def evaluation(self, step: int, task: str, metrics: Mapping[str, float | str], *, suite: str = "eval",
                   **fields: Any) -> dict[str, Any]:
        """An ``eval`` event (``fields``: checkpoint, n, config, versions)."""
        return self.event("eval", step=step, suite=suite, task=task, metrics=dict(metrics), **fields)

    def media(self, step: int, key: str, kind: str, **fields: Any) -> dict[str, Any]:
        """A ``media`` event of ``kind`` (``fields``: the kind's, and caption)."""
        return self.event("media", step=step, key=key, kind=kind, **fields)

    def finish(self, status: str = "finished", step: int | None = None) -> None:
        self.send([self.event("finished", status=status, step=step)])


def encoded(value: float | None) -> float | str:
    """A stored value as the API returns it (None = NaN)."""
    return (
        "NaN"
        if value is None or (isinstance(value, float) and math.isnan(value))
        else ev.encode_value(value)
    )
