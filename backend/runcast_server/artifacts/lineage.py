"""Segments of a run, and which earlier segments a segment continues.

A resume at step ``s`` opens a new segment; it continues the newest earlier segment
that started at or before ``s``. The *lineage* of segment k is k itself over
``[start_k, inf)``, then its parent over ``[start_parent, start_k]``, and so on: the
history that produced the weights of segment k. The parent's window includes
``start_k`` itself: a checkpoint saved at the resume step is what the child resumed
from. When two lineage members have something at the same step, the newer segment's wins.
"""

from __future__ import annotations

from dataclasses import dataclass

from sqlalchemy import select
from sqlalchemy.orm import Session

from runcast_server.record.models import Segment

INF = 2**63


@dataclass(frozen=True)
class SegmentRef:
    id: int
    index: int
    start_step: int
    resumed: bool


@dataclass(frozen=True)
class Window:
    segment: SegmentRef
    lo: int
    hi: int  # inclusive
    depth: int  # 0: the segment itself, 1: its parent, ...

    def covers(self, segment_index: int, step: int) -> bool:
        return segment_index == self.segment.index and self.lo <= step <= self.hi


def run_segments(session: Session, run_id: str) -> list[SegmentRef]:
    rows = session.execute(
        select(Segment.id, Segment.index, Segment.start_step, Segment.resumed)
        .where(Segment.run_id == run_id)
        .order_by(Segment.index)
    ).all()
    return [SegmentRef(id=r[0], index=r[1], start_step=r[2] or 0, resumed=bool(r[3])) for r in rows]


def lineage(segments: list[SegmentRef], index: int) -> list[Window]:
    """The windows of segment ``index``'s lineage, itself first."""
    by_index = {s.index: s for s in segments}
    current = by_index.get(index)
    if current is None:
        return []
    windows = [Window(current, current.start_step, INF, 0)]
    depth = 0
    while True:
        parents = [s for s in segments if s.index < current.index and s.start_step <= current.start_step]
        if not parents:
            return windows
        parent = max(parents, key=lambda s: s.index)
        depth += 1
        windows.append(Window(parent, parent.start_step, current.start_step, depth))
        current = parent


def in_lineage(windows: list[Window], segment_index: int, step: int) -> Window | None:
    """The window that holds (segment, step), if any."""
    for window in windows:
        if window.covers(segment_index, step):
            return window
    return None
