"""A run's timeline events, oldest first, paged by event id."""

from __future__ import annotations

from sqlalchemy import select
from sqlalchemy.orm import Session

from runcast_server.policy.apply import TEAM, View
from runcast_server.reads.published import published_payload
from runcast_server.reads.schemas import EventList, TimelineEvent
from runcast_server.reads.values import strict_json
from runcast_server.record.models import Event, Run, Segment


def list_events(
    session: Session,
    run: Run,
    *,
    types: list[str] | None,
    segment: int | None,
    after: int | None,
    limit: int,
    full: bool = False,
    private_ok: bool = False,
    view: View = TEAM,
) -> EventList:
    """Events of ``run`` with id > ``after``, filtered by type and segment index (payloads as
    ``reads/published.py`` shows them: ``full`` with paths, host and pid; ``private_ok`` with
    private checkpoints' files; ``view``: the publication policy's filter, policy/apply.py)."""
    query = (
        select(Event, Segment.index)
        .join(Segment, Segment.id == Event.segment_id)
        .where(Event.run_id == run.id)
    )
    if types:
        query = query.where(Event.type.in_(types))
    if view.horizon is not None:  # a delayed reader: events of the versions due (policy/delay.py)
        query = query.where(view.horizon.events_due())
    if hidden := view.hidden_event_types():
        query = query.where(Event.type.not_in(hidden))
    if segment is not None:
        query = query.where(Segment.index == segment)
    if after is not None:
        query = query.where(Event.id > after)
    rows = session.execute(query.order_by(Event.id).limit(limit + 1)).all()
    page = rows[:limit]
    events = [
        TimelineEvent(
            id=e.id,
            type=e.type,
            segment=index,
            seq=e.seq,
            step=e.step,
            ts=e.ts,
            received_at=e.received_at,
            payload=view.payload(e.type, published_payload(e.type, strict_json(e.payload or {}), full, private_ok)),
        )
        for e, index in page
        if view.shown(e.type, e.payload or {})
    ]
    next_cursor = str(events[-1].id) if len(rows) > limit else None
    version = view.horizon.version if view.horizon is not None else run.version  # read with the run, before the rows
    return EventList(events=events, next_cursor=next_cursor, version=version)

