"""A run's record over a step range as one reader may see it (policy.apply.View): metric points,
alerts, checkpoints, evaluations, samples and timeline changes. The draft and the live blocks'
data both read through here, so the publication policy and the broadcast delay hold for both."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from sqlalchemy import select
from sqlalchemy.orm import Session

from runcast_server.alerts.models import Alert
from runcast_server.artifacts.checkpoints import CheckpointRecord, load_checkpoints
from runcast_server.outputs.models import Evaluation, Sample
from runcast_server.policy.apply import View
from runcast_server.record.models import Event, Point, Run, Segment, Series

MAX_POINTS = 5000  # per key and chart: a longer range is thinned evenly
MAX_ROWS = 50  # samples, evaluations and changes per block
CHANGE_TYPES = ("data_mix", "run_started", "command", "note")


@dataclass(frozen=True)
class Period:
    """A step range; None at either end: open (the run's start, its newest step)."""

    start: int | None
    end: int | None

    def holds(self, step: int | None) -> bool:
        return step is not None and (self.start is None or step >= self.start) and (self.end is None or step <= self.end)


def _value(v: float | None) -> float | None:
    return None if v is None or not math.isfinite(v) else v


def points(session: Session, run: Run, view: View, key: str, period: Period) -> dict[str, list[Any]] | None:
    """``{"step": [...], "value": [...]}`` of ``key`` over the period (every segment, by step); None: withheld."""
    if not view.metric(key):
        return None
    query = (select(Point.step, Point.value).join(Series, Series.id == Point.series_id)
             .where(Series.run_id == run.id, Series.key == key))
    if period.start is not None:
        query = query.where(Point.step >= period.start)
    if period.end is not None:
        query = query.where(Point.step <= period.end)
    if view.horizon is not None:
        query = query.where(view.horizon.points_due())
    rows = list(session.execute(query.order_by(Point.step)).all())
    if len(rows) > MAX_POINTS:
        stride = math.ceil(len(rows) / MAX_POINTS)
        rows = rows[::stride] + ([rows[-1]] if (len(rows) - 1) % stride else [])
    return {"step": [r[0] for r in rows], "value": [_value(r[1]) for r in rows]}


def alerts(session: Session, run: Run, view: View, period: Period) -> list[Alert]:
    found = session.scalars(select(Alert).where(Alert.run_id == run.id).order_by(Alert.id))
    return [a for a in found if period.holds(a.step) and view.alert({"key": a.key})
            and (view.until is None or a.opened_at <= view.until)]


def checkpoints(session: Session, run: Run, view: View, period: Period) -> list[CheckpointRecord]:
    if not view.event_shown("checkpoint"):
        return []
    return [c for c in load_checkpoints(session, run.id, view.horizon)
            if period.holds(c.step) and (c.public or view.team)]


def _due_output(view: View, version: int | None) -> bool:
    return view.horizon is None or version is None or version <= view.horizon.version


def evaluations(session: Session, run: Run, view: View, period: Period) -> list[Evaluation]:
    if not view.output_shown("evals"):
        return []
    rows = session.scalars(select(Evaluation).where(Evaluation.run_id == run.id).order_by(Evaluation.step, Evaluation.id))
    return [e for e in rows if period.holds(e.step) and _due_output(view, e.version)][:MAX_ROWS]


def samples(session: Session, run: Run, view: View, period: Period) -> list[Sample]:
    if not view.output_shown("samples"):
        return []
    rows = session.scalars(select(Sample).where(Sample.run_id == run.id).order_by(Sample.step, Sample.id))
    return [s for s in rows if period.holds(s.step) and _due_output(view, s.version) and view.metric(s.key)][:MAX_ROWS]


@dataclass(frozen=True)
class Change:
    """One line of the record: a data-mix change, a resume, a code revision, a command, a note."""

    kind: str
    step: int | None
    text: str


def _command_text(p: dict[str, Any]) -> str:
    what = p.get("kind") or "command"
    if p.get("name"):
        what += f" {p['name']}={p.get('value')}"
    who = f" by {p['sender']}" if p.get("sender") else ""
    why = f" ({p['reason']})" if p.get("reason") else ""
    state = p.get("state") or "sent"
    return f"command {what}{who}{why}: {state}" + (f", {p['message']}" if p.get("message") else "")


def changes(session: Session, run: Run, view: View, period: Period) -> list[Change]:
    """The period's data-mix changes, resumes, code revisions, commands and notes, oldest first."""
    query = (select(Event.type, Event.step, Event.payload, Segment.index).join(Segment, Segment.id == Event.segment_id)
             .where(Event.run_id == run.id, Event.type.in_(CHANGE_TYPES)))
    if view.horizon is not None:
        query = query.where(view.horizon.events_due())
    if hidden := view.hidden_event_types():
        query = query.where(Event.type.not_in(hidden))
    out: list[Change] = []
    code: str | None = None
    for kind, step, payload, index in session.execute(query.order_by(Event.id)).all():
        p = payload or {}
        if kind == "run_started":
            sha = (p.get("code") or {}).get("sha") if view.code_shown else None
            at = p.get("resume_step") if p.get("resume_step") is not None else step
            if index > 0 and period.holds(at):
                out.append(Change("resume", at, f"resumed at step {at} (segment {index})"))
            if sha and code is not None and sha != code and period.holds(at):
                out.append(Change("revision", at, f"code revision {str(sha)[:12]}"))
            code = sha or code
            continue
        if not view.shown(kind, p) or not period.holds(step if step is not None else p.get("step")):
            continue
        if kind == "data_mix":
            weights = ", ".join(f"{k} {v:g}" for k, v in sorted((p.get("weights") or {}).items()))
            out.append(Change("data_mix", step, f"data mix: {weights}"))
        elif kind == "command":
            out.append(Change("command", step if step is not None else p.get("step"), _command_text(p)))
        else:
            out.append(Change("note", step, f"note: {str(p.get('text') or p.get('message') or '')[:300]}"))
    return out[-MAX_ROWS:]
