"""A fixed-window rate limit in the database: ``limit`` hits per ``window_s`` per bucket."""

from __future__ import annotations

import time

from sqlalchemy import delete
from sqlalchemy.orm import Session

from runcast_server.alerts.models import RateLimit
from runcast_server.core.db import upsert


def hit(session: Session, bucket: str, limit: int, window_s: int, now: float | None = None) -> float | None:
    """Count one hit; None when allowed, else the seconds until the window ends."""
    now = time.time() if now is None else now
    window = int(now // window_s)
    table = RateLimit.__table__
    stmt = upsert(session, table).values(bucket=bucket[:128], window=window, count=1)
    count = session.execute(
        stmt.on_conflict_do_update(index_elements=["bucket", "window"], set_={"count": table.c.count + 1})
        .returning(table.c.count)
    ).scalar_one()
    if window % 16 == 0:  # now and then, forget old windows
        session.execute(delete(table).where(table.c.window < window - 1))
    if count > limit:
        return (window + 1) * window_s - now
    return None
