"""Reading a run's evaluation scores: the list, and the scores of each checkpoint.

An evaluation belongs to a checkpoint when it is tied to the checkpoint's step (``checkpoint``),
or, tied to none, logged at that step. Steps, not segments, decide: ``runcast eval import``
scores a checkpoint of the run after the fact.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from sqlalchemy import ColumnElement, and_, or_, select
from sqlalchemy.orm import Session

from runcast_server.outputs.access import due
from runcast_server.outputs.models import Evaluation
from runcast_server.policy.apply import View
from runcast_server.record.models import Run, Segment

_FIELDS = ("id", "segment", "step", "checkpoint", "suite", "task", "metrics", "n")
_COLUMNS = (Evaluation.id, Segment.index, Evaluation.step, Evaluation.checkpoint, Evaluation.suite, Evaluation.task,
            Evaluation.metrics, Evaluation.n)  # not config and versions: up to 68 KiB a row, the export's


def _entries(session: Session, *conditions: ColumnElement[bool]) -> list[dict[str, Any]]:
    """Evaluations as ``list_evals`` shows them, by step, suite, task and id."""
    e = Evaluation
    rows = session.execute(
        select(*_COLUMNS).join(Segment, Segment.id == e.segment_id).where(*conditions)
        .order_by(e.step, e.suite, e.task, e.id)
    ).all()
    return [dict(zip(_FIELDS, row)) for row in rows]


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
    return {"evals": _entries(session, *conditions), "withheld": False}


def checkpoint_evals(session: Session, run_id: str, view: View, steps: Iterable[int]) -> dict[int, list[dict[str, Any]]]:
    """Checkpoint step -> the evaluations that belong to it (as ``list_evals`` shows them); none
    when the policy withholds evaluations from the reader."""
    wanted = sorted(set(steps))
    if not wanted or not view.output_shown("evals"):
        return {}
    e = Evaluation
    out: dict[int, list[dict[str, Any]]] = {}
    for entry in _entries(session, e.run_id == run_id, *due(view, e),
                          or_(e.checkpoint.in_(wanted), and_(e.checkpoint.is_(None), e.step.in_(wanted)))):
        out.setdefault(entry["checkpoint"] if entry["checkpoint"] is not None else entry["step"], []).append(entry)
    return out
