"""Run management by its project's token: rename, tag, archive, delete, spool reports.

Every function takes a run already checked to belong to the caller's project
(``owned_run``); another project's run is reported exactly as an unknown one (404), so
run ids of other projects do not leak and nothing of theirs changes.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass

from runcast.wire.events import MAX_TAGS, TIMESTAMP_KEY
from sqlalchemy import CursorResult, Table, delete, func, select
from sqlalchemy.orm import Session

from runcast_server.core.errors import Invalid, NotFound
from runcast_server.core.models import Project
from runcast_server.metrics.models import Rollup
from runcast_server.record import partitions
from runcast_server.record.models import Point, Run, Segment, Series
from runcast_server.runs.models import RunTag

RunRows = Callable[[Session, str], object]
"""Deletes the rows of one run (by id) that another domain keeps without a ``run_id`` column."""



def owned_run(session: Session, run_id: str, project: Project) -> Run:
    """The run, locked for this transaction, if ``project`` holds it; else ``NotFound`` (as for an unknown id)."""
    run = session.scalar(
        select(Run).where(Run.id == run_id, Run.project_id == project.id).with_for_update()
    )
    if run is None:
        raise NotFound("run", field="run")
    return run


def retag(session: Session, run: Run, add: list[str], remove: list[str]) -> list[str]:
    """Add then remove tags of the run; returns its tags, sorted."""
    tags = (set(session.scalars(select(RunTag.tag).where(RunTag.run_id == run.id))) | set(add)) - set(remove)
    if len(tags) > MAX_TAGS:
        raise Invalid(f"a run holds at most {MAX_TAGS} tags", field="tags.add")
    session.execute(delete(RunTag).where(RunTag.run_id == run.id))
    session.add_all(RunTag(run_id=run.id, tag=tag) for tag in sorted(tags))
    session.flush()
    return sorted(tags)


def report_spool(session: Session, run: Run, segment_uid: str, events: int, now: float) -> Segment:
    """Record that ``events`` of the run's segment wait in the trainer's local spool (0: none)."""
    segment = session.scalar(select(Segment).where(Segment.run_id == run.id, Segment.uid == segment_uid))
    if segment is None:
        raise NotFound("segment", field="segment")
    segment.spooled_events = events
    segment.spooled_at = now
    session.flush()
    return segment


def set_archived(run: Run, archived: bool) -> None:
    """Archive (keep the first archive time) or restore the run."""
    if not archived:
        run.archived_at = None
    elif run.archived_at is None:
        run.archived_at = time.time()


def drop_detached(session: Session) -> int:
    """Drop the partitions deleted runs left detached (PostgreSQL); call after their delete commits."""
    return partitions.drop_detached(session.connection())


@dataclass(frozen=True)
class Deleted:
    run: str
    points: int
    series: int
    segments: int
    events: int


def delete_run(session: Session, run: Run, tables: Sequence[Table], dependents: Iterable[RunRows] = ()) -> Deleted:
    """Delete the run and every row that belongs to it, in one transaction.

    Every one of ``tables`` (every domain's, sorted parents first: ``tables.delete_run``
    passes them) with a ``run_id`` column is cleared (a table added later is covered without
    a change here), children first; points and rollups by the run's series, and before
    the tables, the rows of other domains that have no ``run_id`` by ``dependents`` (alert
    deliveries by the run's alerts and subscriptions). A run with
    partitions of its own (PostgreSQL, ``partitions.py``) loses its points, rollups and
    replay log by detaching them (``drop_detached`` drops them after the commit).
    The answer's ``points`` counts the logged points (its series' counts), not the server's
    step times.
    """
    series_ids = select(Series.id).where(Series.run_id == run.id).scalar_subquery()
    points = session.scalar(select(func.coalesce(func.sum(Series.count), 0))
                            .where(Series.run_id == run.id, Series.key != TIMESTAMP_KEY)) or 0
    if run.block:
        partitions.detach(session.connection(), run.block)
    else:
        # The id range as constants too, so PostgreSQL plans (and locks) only the legacy partitions.
        lo, hi = session.execute(select(func.min(Series.id), func.max(Series.id)).where(Series.run_id == run.id)).one()
        if lo is not None:
            session.execute(delete(Point).where(Point.series_id.in_(series_ids), Point.series_id.between(lo, hi)))
        session.execute(delete(Rollup).where(Rollup.series_id.in_(series_ids), Rollup.series_id.between(lo, hi)))
    for dependent in dependents:
        dependent(session, run.id)
    counts: dict[str, int] = {}
    for table in reversed(tables):  # children before their parents
        if "run_id" in table.c:
            gone = session.execute(delete(table).where(table.c.run_id == run.id))
            counts[table.name] = gone.rowcount if isinstance(gone, CursorResult) else 0
    run_id = run.id
    session.execute(delete(Run).where(Run.id == run_id))
    session.expunge(run)
    return Deleted(run=run_id, points=points, series=counts["series"], segments=counts["segments"],
                   events=counts["events"])
