"""Reading a run's evaluation scores: the list, and the scores of each checkpoint.

An evaluation belongs to a checkpoint when it is tied to the checkpoint's step (``checkpoint``),
or, tied to none, logged at that step. Steps, not segments, decide: ``runcast eval import``
scores a checkpoint of the run after the fact.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from sqlalchemy import and_, or_, select
from sqlalchemy.orm import Session

from runcast_server.core.models import Run, Segment
from runcast_server.outputs.access import due
from runcast_server.outputs.models import Evaluation
from runcast_server.policy.apply import View


def _entry(row: Evaluation, segment: int) -> dict[str, Any]:
    return {"id": row.id, "segment": segment, "step": row.step, "checkpoint": row.checkpoint, "suite": row.suite,
            "task": row.task, "metrics": row.metrics, "n": row.n}


def list_evals(session: Session, run: Run, view: View, *, suite: str | None, task: str | None) -> dict[str, Any]:
    """The run's evaluations (of one suite and task, if given) by step, then suite, task and id."""
    if not view.output_shown("evals"):
        return {"evals": [], "withheld": True}
    e = Evaluation
    conditions = [e.run_id == run.id, *due(view, e)]
    if suite is not None:
        conditions.append(e.suite == suite)
    if task is not None:
        conditions.append(e.task == task)
    rows = session.execute(
        select(e, Segment.index).join(Segment, Segment.id == e.segment_id).where(*conditions)
        .order_by(e.step, e.suite, e.task, e.id)
    ).all()
    return {"evals": [_entry(row, index) for row, index in rows], "withheld": False}


def checkpoint_evals(session: Session, run_id: str, view: View, steps: Iterable[int]) -> dict[int, list[dict[str, Any]]]:
    """Checkpoint step -> the evaluations that belong to it (as ``list_evals`` shows them); none
    when the policy withholds evaluations from the reader."""
    wanted = sorted(set(steps))
    if not wanted or not view.output_shown("evals"):
        return {}
    e = Evaluation
    rows = session.execute(
        select(e, Segment.index).join(Segment, Segment.id == e.segment_id)
        .where(e.run_id == run_id, *due(view, e),
               or_(e.checkpoint.in_(wanted), and_(e.checkpoint.is_(None), e.step.in_(wanted))))
        .order_by(e.step, e.suite, e.task, e.id)
    ).all()
    out: dict[int, list[dict[str, Any]]] = {}
    for row, index in rows:
        out.setdefault(row.checkpoint if row.checkpoint is not None else row.step, []).append(_entry(row, index))
    return out
