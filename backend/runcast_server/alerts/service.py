"""Alert reads: lists with filters, the checkpoints around an alert, and the views
that the API, the feeds and every notification share."""

from __future__ import annotations

import math
from typing import Any

from sqlalchemy import ColumnElement, func, select
from sqlalchemy.orm import Session

from runcast_server.alerts.models import Alert, AlertConfig
from runcast_server.core.i18n import Messages, messages
from runcast_server.core.models import Project
from runcast_server.reads.published import published_checkpoint, sees_everything
from runcast_server.record.models import Event, Run, Segment

KINDS = ("spike", "nonfinite", "grad_norm", "plateau", "divergence", "throughput", "stall", "restart_loop")
STATES = ("open", "closed")
TITLES = {
    "spike": "Loss spike",
    "nonfinite": "Non-finite value",
    "grad_norm": "Gradient-norm explosion",
    "plateau": "Loss plateau",
    "divergence": "Divergence",
    "throughput": "Throughput drop",
    "stall": "Run stalled",
    "restart_loop": "Restart loop",
}


def stall_after_sql(default: float) -> ColumnElement[float]:
    """Each run's stall threshold in SQL (correlated to ``Run``): its ``alerts.stall.after_s``, else ``default``.

    One threshold per run: the 'stalled' status and the stall alert both use it.
    """
    override = (
        select(AlertConfig.overrides[("stall", "after_s")].as_float())
        .where(AlertConfig.run_id == Run.id)
        .scalar_subquery()
    )
    return func.coalesce(override, default)


def stall_after(session: Session, run_id: str, default: float) -> float:
    """One run's stall threshold (see ``stall_after_sql``)."""
    row = session.get(AlertConfig, run_id)
    stall = (row.overrides or {}).get("stall") if row is not None else None
    value = stall.get("after_s") if isinstance(stall, dict) else None
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else default


def _checkpoint(e: Event | None, full: bool) -> dict[str, Any] | None:
    if e is None:
        return None
    p = e.payload or {}
    if p.get("public", True) is False:  # a private checkpoint's file is its project's business
        return {"event": e.id, "step": e.step, "public": False, "ts": e.ts}
    shown = published_checkpoint(p, full)
    out = {"event": e.id, "step": e.step, "filename": shown["filename"], "sha256": shown.get("sha256"),
           "public": True, "ts": e.ts}
    if full:
        out["path"] = shown.get("path")
    return out


def checkpoints_around(session: Session, run_id: str, step: int | None, opened_at: float,
                       full: bool = False) -> dict[str, Any]:
    """The last checkpoint at or before the alert's step and the first after it (by step;
    by time for alerts without a step); recorded paths only when ``full``."""
    q = select(Event).where(Event.run_id == run_id, Event.type == "checkpoint")
    if step is not None:
        before = session.scalars(q.where(Event.step <= step).order_by(Event.step.desc(), Event.id.desc()).limit(1)).first()
        after = session.scalars(q.where(Event.step > step).order_by(Event.step, Event.id).limit(1)).first()
    else:
        before = session.scalars(q.where(Event.ts <= opened_at).order_by(Event.ts.desc()).limit(1)).first()
        after = session.scalars(q.where(Event.ts > opened_at).order_by(Event.ts).limit(1)).first()
    return {"before": _checkpoint(before, full), "after": _checkpoint(after, full)}


def alert_view(session: Session, alert: Alert, *, base_url: str | None = None,
               run: Run | None = None, project: str | None = None, full: bool | None = None) -> dict[str, Any]:
    """One alert as the API, feeds and notifications show it. ``full``: with checkpoint
    paths (reads/published.py); by default as every reader may see it."""
    if run is None:
        run = session.get(Run, alert.run_id)
    if full is None:
        full = run is not None and sees_everything(run, None)
    if project is None and run is not None:
        project = session.scalar(select(Project.name).where(Project.id == run.project_id))
    segment = session.scalar(select(Segment.index).where(Segment.id == alert.segment_id)) if alert.segment_id else None
    out = {
        "id": alert.id,
        "run": alert.run_id,
        "run_name": run.name if run else None,
        "project": project,
        "kind": alert.kind,
        "title": TITLES.get(alert.kind, alert.kind),
        "key": alert.key or None,
        "state": alert.state,
        "segment": segment,
        "step": alert.step,
        "end_step": alert.end_step,
        "opened_at": alert.opened_at,
        "closed_at": alert.closed_at,
        "evidence": alert.evidence or {},
        "event": alert.event_id,
        "checkpoints": checkpoints_around(session, alert.run_id, alert.step, alert.opened_at, full),
    }
    if base_url:
        out["url"] = f"{base_url.rstrip('/')}/runs/{alert.run_id}#alert-{alert.id}"
    return out


def list_alerts(session: Session, run: Run, project: str, *, kinds: list[str] | None, states: list[str] | None,
                after: int | None, limit: int, base_url: str | None = None, full: bool = False,
                until: float | None = None) -> dict[str, Any]:
    """A page of the run's alerts; ``until`` (a delayed reader, policy/delay.py): as they were
    then (alerts opened later left out, one closed later still open)."""
    q = select(Alert).where(Alert.run_id == run.id)
    if until is not None:
        q = q.where(Alert.opened_at <= until)
    if kinds:
        q = q.where(Alert.kind.in_(kinds))
    if states:
        q = q.where(Alert.state.in_(states))
    if after is not None:
        q = q.where(Alert.id > after)
    rows = list(session.scalars(q.order_by(Alert.id).limit(limit + 1)))
    page = rows[:limit]
    views = [alert_view(session, a, base_url=base_url, run=run, project=project, full=full) for a in page]
    return {
        "alerts": views if until is None else [as_of(v, until) for v in views],
        "next_cursor": str(page[-1].id) if len(rows) > limit else None,
    }


def as_of(view: dict[str, Any], until: float) -> dict[str, Any]:
    """An alert view as it was at ``until``: one closed since is still open."""
    if view.get("closed_at") is None or view["closed_at"] <= until:
        return view
    evidence = {k: v for k, v in (view.get("evidence") or {}).items() if k != "close"}
    return {**view, "state": "open", "end_step": None, "closed_at": None, "evidence": evidence}


def _num(x: Any) -> str:
    if isinstance(x, float) and math.isfinite(x):
        return f"{x:.4g}"
    return str(x)


def title(kind: str, t: Messages) -> str:
    """An alert kind's title in ``t``'s language."""
    return t(TITLES[kind]) if kind in TITLES else kind


_EVIDENCE = ("value", "baseline", "threshold", "smoothed", "best", "val")


def summary(view: dict[str, Any], phase: str, t: Messages | None = None) -> str:
    """One line for a notification in ``t``'s language (English by default): what, where, and the evidence."""
    t = t or messages()
    fields = {"title": title(view["kind"], t), "where": f"{view.get('project')}/{view.get('run_name') or view['run']}",
              "key": view.get("key") or ""}
    if phase == "close":
        subject = t("{title} on {where} {key}", context="closed", **fields) if fields["key"] else t(
            "{title} on {where}", context="closed", **fields)
        close = (view.get("evidence") or {}).get("close") or {}
        reason = t(str(close.get("reason", "closed")), context="reason")
        end = t(" at step {step}", context="ended", step=view["end_step"]) if view.get("end_step") is not None else ""
        if view.get("step") is None:
            return t("{subject} ended{end} ({reason}); it opened.", subject=subject, end=end, reason=reason)
        at = t(" at step {step}", context="opened", step=view["step"])
        return t("{subject} ended{end} ({reason}); it opened{at}.", subject=subject, end=end, reason=reason, at=at)
    subject = t("{title} on {where} {key}", **fields) if fields["key"] else t("{title} on {where}", **fields)
    if view.get("step") is not None:
        subject += t(" at step {step}", step=view["step"])
    ev = (view.get("evidence") or {}).get("open") or {}
    detail = t(", ").join(t("{name} {value}", name=t(k, context="evidence"), value=_num(ev[k]))
                          for k in _EVIDENCE if k in ev)
    return t("{subject}: {detail}.", subject=subject, detail=detail) if detail else t("{subject}.", subject=subject)
