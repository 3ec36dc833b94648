"""A report's first draft, generated from the period's record as one reader sees it: the main
loss's change, then alerts, checkpoints, evaluations, data-mix changes, code revisions, resumes
and commands, each a short line, with live blocks the team may keep or drop."""

from __future__ import annotations

from sqlalchemy import select
from sqlalchemy.orm import Session

from runcast_server.policy.apply import View
from runcast_server.record.models import Run, Series
from runcast_server.reports import record
from runcast_server.reports.record import Period

LOSS_KEYS = ("train/loss", "loss", "train_loss", "train/lm_loss")


def main_loss(session: Session, run: Run, view: View) -> str | None:
    """The run's main loss as the reader may see it: a usual name first, else the first key naming a loss."""
    keys = sorted({k for (k,) in session.execute(select(Series.key).where(Series.run_id == run.id)) if view.metric(k)})
    for key in LOSS_KEYS:
        if key in keys:
            return key
    return next((k for k in keys if "loss" in k and not k.startswith("system/")), None)


def _fmt(value: float) -> str:
    return f"{value:.4g}"


def _loss_lines(session: Session, run: Run, view: View, period: Period) -> tuple[str | None, list[str]]:
    key = main_loss(session, run, view)
    if key is None:
        return None, []
    data = record.points(session, run, view, key, period) or {"step": [], "value": []}
    pairs = [(s, v) for s, v in zip(data["step"], data["value"]) if v is not None]
    if not pairs:
        return key, [f"- `{key}`: no values in this period."]
    (s0, first), (s1, last) = pairs[0], pairs[-1]
    low_step, low = min(pairs, key=lambda p: p[1])
    change = f" ({(last - first) / abs(first):+.1%})" if first else ""
    return key, [f"- `{key}`: {_fmt(first)} at step {s0} -> {_fmt(last)} at step {s1}{change}; "
                 f"lowest {_fmt(low)} at step {low_step}."]


def draft(session: Session, run: Run, view: View, start: int, end: int) -> str:
    """The Markdown draft of a report on steps ``start``..``end`` of ``run`` under ``view``."""
    period = Period(start, end)
    key, lines = _loss_lines(session, run, view, period)
    out = [f"# {run.name}: steps {start} to {end}", "", "## Loss", *lines]
    if key is not None:
        out += ["", f"```runcast-chart keys={key} from={start} to={end}", "```"]
    alerts = record.alerts(session, run, view, period)
    if alerts:
        out += ["", "## Alerts"] + [f"- {a.kind} on `{a.key or 'the run'}` at step {a.step}"
                                    + (f", closed at step {a.end_step}" if a.end_step is not None else ", open")
                                    for a in alerts]
    checkpoints = record.checkpoints(session, run, view, period)
    if checkpoints:
        out += ["", "## Checkpoints"] + [f"- step {c.step}" for c in checkpoints]
        out += ["", f"```runcast-checkpoint step={checkpoints[-1].step}", "```"]
    evals = record.evaluations(session, run, view, period)
    if evals:
        out += ["", "## Evaluations"] + [
            f"- step {e.step}, {e.suite}/{e.task}: " + ", ".join(f"{k} {v}" for k, v in sorted(e.metrics.items()))
            for e in evals]
        out += ["", f"```runcast-evals from={start} to={end}", "```"]
    changes = record.changes(session, run, view, period)
    titles = {"data_mix": "Data mix", "revision": "Code revisions", "resume": "Resumes", "command": "Decisions",
              "note": "Notes"}
    for kind, title in titles.items():
        picked = [c for c in changes if c.kind == kind]
        if picked:
            out += ["", f"## {title}"] + [f"- step {c.step}: {c.text}" for c in picked]
    if changes:
        out += ["", f"```runcast-changes from={start} to={end}", "```"]
    return "\n".join(out) + "\n"
