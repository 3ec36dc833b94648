"""Reading a run's media: its keys, and each key's images, tables and histograms across steps."""

from __future__ import annotations

from typing import Any

from sqlalchemy import and_, func, or_, select
from sqlalchemy.orm import Session

from runcast_server.outputs.access import due
from runcast_server.outputs.models import Media
from runcast_server.policy.apply import View
from runcast_server.reads.cursor import encode_step_cursor
from runcast_server.record.models import Run, Segment

_OPTIONAL = {"image": ("caption",), "table": ("caption",), "histogram": ("caption", "nan", "inf", "neg_inf")}


def image_url(run_id: str, media_id: int) -> str:
    """Where an image media row's bytes are served (``?w=`` for a thumbnail)."""
    return f"/api/v1/runs/{run_id}/media/{media_id}/image"


def list_keys(session: Session, run: Run, view: View) -> dict[str, Any]:
    """The run's media keys, each of one kind, by key."""
    if not view.output_shown("media"):
        return {"keys": [], "withheld": True}
    m = Media
    rows = session.execute(
        select(m.key, m.kind, func.count(), func.min(m.step), func.max(m.step))
        .where(m.run_id == run.id, *due(view, m)).group_by(m.key, m.kind).order_by(m.key, m.kind)
    ).all()
    keys = [{"key": k, "kind": kind, "count": n, "first_step": lo, "last_step": hi} for k, kind, n, lo, hi in rows]
    return {"keys": keys, "withheld": False}


def _entry(run_id: str, row: Media, segment: int) -> dict[str, Any]:
    """A media row as the list shows it: the kind's fields as the wire had them."""
    payload = dict(row.payload or {})
    for name in _OPTIONAL[row.kind]:
        payload.setdefault(name, None)
    out = {"id": row.id, "segment": segment, "step": row.step, "key": row.key, "kind": row.kind, **payload}
    if row.kind == "image":
        out.update(blob=row.blob, image_url=image_url(run_id, row.id))
    return out


def list_media(
    session: Session, run: Run, view: View, *, key: str | None, after: tuple[int, int] | None, limit: int
) -> dict[str, Any]:
    """Media rows (of one key, if given) oldest step first, then in the order stored."""
    if not view.output_shown("media"):
        return {"media": [], "next_cursor": None, "withheld": True}
    m = Media
    conditions = [m.run_id == run.id, *due(view, m)]
    if key is not None:
        conditions.append(m.key == key)
    if after is not None:
        conditions.append(or_(m.step > after[0], and_(m.step == after[0], m.id > after[1])))
    rows = session.execute(
        select(m, Segment.index).join(Segment, Segment.id == m.segment_id)
        .where(*conditions).order_by(m.step, m.id).limit(limit + 1)
    ).all()
    page = rows[:limit]
    cursor = encode_step_cursor(page[-1][0].step, page[-1][0].id) if len(rows) > limit else None
    return {"media": [_entry(run.id, row, index) for row, index in page], "next_cursor": cursor, "withheld": False}
