"""``runcast eval import``: an evaluation's scores as ``eval`` events of a run the server holds.

The server stores an event only on a segment it knows, and its reads do not name segment
ids (an SDK run's are random), so the scores go on a segment of their own: ``eval_segment``,
the same for every import into the run, opened by a ``run_started`` that is not a resume
(``resume_step`` null: no restart is drawn or counted by the restart-loop detector) and
dated at the run's start. The run's name, config, start, status and end stay as they are:
the server keeps the first ``run_started`` of a run id and decides the status by the latest
``run_started`` or ``finished`` in time (a tie: the later segment). A run whose end is at its
start (a source without times) gets a ``finished`` of its own status at that time, which
keeps the status.

``seq``: each import takes a block of ``BLOCK`` numbers chosen by a hash of what it imports
(the file's bytes, the suite, the step and checkpoint asked): ``1 + block * BLOCK + row``. The
same import sends the same events, which the server stores once per (segment, seq); another
import takes another block (two imports into one run share a block with odds of 1 in 2^40).
"""

from __future__ import annotations

import base64
import hashlib
import time
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any, Final

from runcast.importers.lm_eval_results import HarnessResults
from runcast.importers.model import Blob, ImportFailed
from runcast.wire import events

BLOCK: Final = 4096
_BLOCK_BYTES: Final = 5  # 2^40 blocks of 4,096: every seq below 2^52


@dataclass(frozen=True)
class StoredRun:
    """What the server says of the run the scores go to (``GET /api/v1/runs/{id}``)."""

    id: str
    project: str
    name: str
    visibility: str
    status: str
    started_at: float
    finished_at: float | None
    last_step: int | None


@dataclass(frozen=True)
class EvalRequest:
    """What the command asks: the suite, the step and checkpoint (None: not given)."""

    suite: str
    step: int | None = None
    checkpoint: int | None = None


@dataclass
class EvalPlan:
    """The events of one import: ``started`` (the segment's), then ``body()``, as ``send`` takes them."""

    run_id: str
    step: int
    started: list[dict[str, Any]]
    evals: list[dict[str, Any]]

    @property
    def blobs(self) -> dict[str, Blob]:
        return {}

    def body(self) -> Iterator[tuple[dict[str, Any], int]]:
        for event in self.evals:
            yield event, 0


def eval_segment(run_id: str) -> str:
    """The id of the segment that holds a run's imported evaluations."""
    return base64.urlsafe_b64encode(hashlib.sha256(f"{run_id}\0evaluations".encode()).digest()[:12]).decode()


def plan_evals(results: HarnessResults, source: bytes, run: StoredRun, request: EvalRequest,
               now: float | None = None) -> EvalPlan:
    """The events that put ``results`` (read from the bytes ``source``) on ``run``; ImportFailed when they cannot be."""
    if len(results.tasks) >= BLOCK:
        raise ImportFailed("results", f"{len(results.tasks)} tasks: at most {BLOCK - 1} in one import")
    step = request.step if request.step is not None else (
        request.checkpoint if request.checkpoint is not None else max(run.last_step or 0, 0))
    segment = eval_segment(run.id)
    started = [_envelope("run_started", run.id, segment, 0, run.started_at, project=run.project, name=run.name,
                         config={}, code={}, env={"imported_from": {"format": "lm-eval-harness"}}, seed=None,
                         resume_step=None, visibility=run.visibility)]
    if run.status in events.FINAL_STATUSES and run.finished_at is not None and run.finished_at <= run.started_at:
        started.append(_envelope("finished", run.id, segment, events.MAX_SEQ - events.FINAL_STATUSES.index(
            run.status), run.finished_at, step=None, status=run.status))
    first = 1 + _block(source, request) * BLOCK
    ts = results.date if results.date is not None and results.date <= events.MAX_TS else (now or time.time())
    evals = []
    for i, task in enumerate(results.tasks):
        body: dict[str, Any] = {"step": step, "suite": request.suite, "task": task.task, "metrics": task.metrics}
        if request.checkpoint is not None:
            body["checkpoint"] = request.checkpoint
        if task.n is not None:
            body["n"] = task.n
        body.update(config=task.config, versions=task.versions)
        evals.append(_envelope("eval", run.id, segment, first + i, ts, **body))
    for event in started + evals:
        try:
            events.validate_event(event)
        except events.EventError as exc:
            where = f"results.{event['task']}" if event["type"] == "eval" else f"run {run.id}"
            raise ImportFailed(where, str(exc)) from None
    return EvalPlan(run_id=run.id, step=step, started=started, evals=evals)


def _block(source: bytes, request: EvalRequest) -> int:
    digest = hashlib.sha256(source)
    digest.update(f"\0{request.suite}\0{request.step}\0{request.checkpoint}".encode())
    return int.from_bytes(digest.digest()[:_BLOCK_BYTES], "big")


def _envelope(kind: str, run: str, segment: str, seq: int, ts: float, /, **body: Any) -> dict[str, Any]:
    return {"v": events.SCHEMA_VERSION, "type": kind, "run": run, "segment": segment, "seq": seq, "ts": ts, **body}
