"""What a comment is anchored to, checked against what its writer may see, and whether a reader
may see a comment on it (the run's publication policy, policy.apply.View).

An anchor the writer may not see answers exactly as an unknown one (404 naming the field): a
withheld metric, sample kind, evaluation kind, checkpoint or alert, or a step a delayed run has
not published yet.
"""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field
from runcast.wire.limits import MAX_STEP
from sqlalchemy import select
from sqlalchemy.orm import Session

from runcast_server.alerts.models import Alert
from runcast_server.artifacts.checkpoints import load_checkpoints
from runcast_server.core.errors import ApiError, NotFound
from runcast_server.outputs.models import Evaluation, Sample
from runcast_server.policy.apply import View
from runcast_server.record.models import Point, Run, Series

AnchorKind = Literal["step", "checkpoint", "alert", "sample", "eval", "report"]


class AnchorIn(BaseModel):
    """Where a new thread is anchored: a step of a metric (``key`` and ``step``), or the ``id`` of
    a checkpoint, an alert, a sample or an evaluation of the run, or a report's number."""

    model_config = ConfigDict(json_schema_extra={
        "if": {"properties": {"kind": {"const": "step"}}},
        "then": {"required": ["key", "step"], "properties": {"key": {"type": "string"}, "step": {"type": "integer"}}},
        "else": {"required": ["id"], "properties": {"id": {"type": "integer"}}},
    })

    kind: AnchorKind
    key: str | None = Field(default=None, max_length=200, description="The metric (kind `step`).")
    step: int | None = Field(default=None, ge=0, le=MAX_STEP, description="The step (kind `step`).")
    id: int | None = Field(default=None, ge=1, le=MAX_STEP, description="The checkpoint's, alert's, sample's or evaluation's id; "
                           "a report's number (kind `report`).")


@dataclass(frozen=True)
class Anchor:
    """A checked anchor: ``step`` is where it stands on the chart; ``key`` the metric (a step's, an
    alert's, a sample's key), kept so that a policy that withholds it later hides the comment."""

    kind: str
    key: str | None
    id: int | None
    step: int | None


def resolve(session: Session, run: Run, view: View, anchor: AnchorIn, *, team: bool,
            reports: Collection[int] = ()) -> Anchor:
    """``anchor`` checked against the run's record as ``view`` shows it (``team``: the run's project);
    ``reports``: the numbers of the run's reports the writer may see (the reports domain knows them)."""
    if anchor.kind == "step":
        if anchor.key is None or anchor.step is None:
            raise ApiError(422, "an anchor of kind 'step' needs 'key' and 'step'", field="anchor.key")
        view.require_metric(anchor.key)
        query = (select(Point.step).join(Series, Series.id == Point.series_id)
                 .where(Series.run_id == run.id, Series.key == anchor.key, Point.step == anchor.step))
        if view.horizon is not None:
            query = query.where(view.horizon.points_due())
        if session.scalar(query.limit(1)) is None:
            raise NotFound(f"a point of {anchor.key!r} at step {anchor.step}", field="anchor.step")
        return Anchor("step", anchor.key, None, anchor.step)
    if anchor.id is None:
        raise ApiError(422, f"an anchor of kind {anchor.kind!r} needs 'id'", field="anchor.id")
    if anchor.kind == "report":
        if anchor.id not in reports:
            raise NotFound("report", field="anchor.id")
        return Anchor("report", None, anchor.id, None)
    if anchor.kind == "checkpoint":
        view.require("checkpoint")
        for record in load_checkpoints(session, run.id, view.horizon):
            if record.id == anchor.id and (record.public or team):
                return Anchor("checkpoint", None, record.id, record.step)
        raise NotFound("checkpoint", field="anchor.id")
    if anchor.kind == "alert":
        alert = session.get(Alert, anchor.id)
        if alert is None or alert.run_id != run.id or not view.alert({"key": alert.key}) or (
                view.until is not None and alert.opened_at > view.until):
            raise NotFound("alert", field="anchor.id")
        return Anchor("alert", alert.key or None, alert.id, alert.step)
    row: Sample | Evaluation | None = (session.get(Sample, anchor.id) if anchor.kind == "sample"
                                       else session.get(Evaluation, anchor.id))
    due = row is not None and (view.horizon is None or row.version is None or row.version <= view.horizon.version)
    if row is None or row.run_id != run.id or not view.output_shown(f"{anchor.kind}s") or not due:
        raise NotFound(anchor.kind, field="anchor.id")
    key = row.key if isinstance(row, Sample) else None
    return Anchor(anchor.kind, key, row.id, row.step)


def shown(view: View, kind: str, key: str | None, step: int | None) -> bool:
    """Whether a reader under ``view`` sees comments on this anchor (the policy, the delay)."""
    if view.team:
        return True
    if view.horizon is not None and step is not None and (view.horizon.last_step is None or step > view.horizon.last_step):
        return False
    if kind == "step":
        return key is not None and view.metric(key)
    if kind == "checkpoint":
        return view.event_shown("checkpoint")
    if kind == "alert":
        return view.alert({"key": key or ""})
    if kind == "sample":
        return view.output_shown("samples")
    if kind == "report":  # whether the report is published: the caller's (comments.reading.visible)
        return True
    return view.output_shown("evals")
