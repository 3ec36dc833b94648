"""What operators see and do with the inbox: counts, quarantined batches, retries.

Shared by the admin routes (``/api/v1/admin/inbox``) and ``runcast quarantine``.
"""

from __future__ import annotations

import json
from typing import Any, Final

from sqlalchemy import CursorResult, func, select, update
from sqlalchemy.orm import Session

from runcast_server.core.models import Project
from runcast_server.inbox.models import InboxRow
from runcast_server.inbox.rows import PENDING, QUARANTINED, STATES

MAX_EVENT_CHARS: Final = 2000  # of each bad event shown by ``show``


def counts(session: Session) -> dict[str, Any]:
    """Rows per state, and how many stored batches' detectors failed (within the retention)."""
    by_state = dict(session.execute(select(InboxRow.state, func.count()).group_by(InboxRow.state)).all())
    failed = session.scalar(select(func.count()).where(InboxRow.detector_error.is_not(None))) or 0
    return {"states": {s: by_state.get(s, 0) for s in STATES}, "detector_errors": failed}


def view(row: InboxRow, project: str | None) -> dict[str, Any]:
    """One row as the API and the CLI show it (without its body)."""
    return {
        "id": row.id,
        "project": project,
        "state": row.state,
        "events": row.events,
        "received_at": row.received_at,
        "attempts": row.attempts,
        "sweeps": row.sweeps,
        "error": row.error,
        "bad_events": row.bad_events or [],
        "detector_error": row.detector_error,
    }


def list_rows(session: Session, *, state: str | None, after: int | None, limit: int) -> dict[str, Any]:
    """Rows oldest first (``state`` None: every state), keyset-paged by id."""
    q = select(InboxRow, Project.name).outerjoin(Project, Project.id == InboxRow.project_id)
    if state is not None:
        q = q.where(InboxRow.state == state)
    if after is not None:
        q = q.where(InboxRow.id > after)
    rows = session.execute(q.order_by(InboxRow.id).limit(limit + 1)).all()
    page = rows[:limit]
    return {
        "rows": [view(row, name) for row, name in page],
        "next_cursor": str(page[-1][0].id) if len(rows) > limit else None,
    }


def show(session: Session, inbox_id: int) -> dict[str, Any] | None:
    """One row, with each bad event's content (from the kept body, truncated)."""
    found = session.execute(
        select(InboxRow, Project.name).outerjoin(Project, Project.id == InboxRow.project_id).where(InboxRow.id == inbox_id)
    ).first()
    if found is None:
        return None
    row, name = found
    out = view(row, name)
    out["body_bytes"] = len(row.body) if row.body is not None else None
    if row.body is not None and row.bad_events:
        try:
            events = json.loads(row.body)["events"]
        except (ValueError, KeyError, TypeError):
            events = None
        for bad in out["bad_events"]:
            index = bad.get("index")
            if isinstance(events, list) and isinstance(index, int) and 0 <= index < len(events):
                bad["event"] = _clip(events[index])
    return out


def _clip(event: Any) -> str:
    text = json.dumps(event, ensure_ascii=True, default=str)
    return text if len(text) <= MAX_EVENT_CHARS else text[:MAX_EVENT_CHARS] + "..."


def retry(session: Session, inbox_id: int, now: float) -> bool:
    """Put a quarantined row back to pending (the caller commits, then enqueues it); False if it is not
    quarantined or has no body (an unreadable broker message)."""
    done = session.execute(
        update(InboxRow)
        .where(InboxRow.id == inbox_id, InboxRow.state == QUARANTINED, InboxRow.body.is_not(None))
        .values(state=PENDING, error=None, bad_events=None, sweeps=0, next_sweep_at=now)
    )
    return isinstance(done, CursorResult) and bool(done.rowcount)  # an UPDATE's result is a CursorResult
