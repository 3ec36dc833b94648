"""The broadcast delay: how far a delayed run's public readers see (policy field ``delay_s``).

The public sees a delayed run as it was ``delay_s`` ago: the batches (run versions) up to
the last one whose ``run_versions.committed_at`` is at most ``now - delay_s`` -- always a
prefix of the versions (versions are stored in order, under the run's row lock).
Finding it reads the log backwards from the newest version, so it costs the versions
inside the delay, not the run's length. ``horizon`` computes that bound once per request;
the read queries apply it (``Horizon.points_due``, ``Horizon.events_due`` and the
per-series ``frontier``). The team sees the run live. The live stream asks
``due_position`` instead (live/fanout.py).

A run with nothing held back gets no horizon (``None``): its public reads cost nothing more.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from sqlalchemy import ColumnElement, and_, or_, select
from sqlalchemy.orm import Session

from runcast_server.reads.steps import training_series
from runcast_server.reads.values import stored_value
from runcast_server.record.models import Event, Point, Run, RunVersion, Series


@dataclass(frozen=True)
class Horizon:
    """What a delayed run's public readers may see: run versions up to ``version``.

    ``until`` is ``now - delay_s`` (events written outside a batch are due when received by
    then); ``status`` and ``last_step`` are the run's as of ``version``; ``frontier`` maps
    each series with points held back to the lowest step held back (every point below it
    is due, so rollup buckets below it may be read as stored).
    """

    version: int
    until: float
    delay_s: float
    status: str
    last_step: int | None
    frontier: dict[int, int] = field(default_factory=dict)
    # due_last_point's answers, kept for the request (detail, list and summary ask the same).
    last_points: dict[int, tuple[int, Any] | None] = field(default_factory=dict, compare=False, repr=False)

    def points_due(self) -> ColumnElement[bool]:
        return Point.version <= self.version

    def events_due(self) -> ColumnElement[bool]:
        return or_(Event.version <= self.version, and_(Event.version.is_(None), Event.received_at <= self.until))


def first_undue(session: Session, run_id: str, until: float) -> tuple[int, float] | None:
    """(version, committed_at) of the first version stored after ``until``; None if there is none."""
    last_due = session.scalar(
        select(RunVersion.version).where(RunVersion.run_id == run_id, RunVersion.committed_at <= until)
        .order_by(RunVersion.version.desc()).limit(1)
    )
    row = session.execute(
        select(RunVersion.version, RunVersion.committed_at)
        .where(RunVersion.run_id == run_id, RunVersion.version > (last_due or 0))
        .order_by(RunVersion.version).limit(1)
    ).first()
    return None if row is None else (int(row[0]), float(row[1]))


def due_position(session: Session, run_id: str, delay_s: float, now: float) -> tuple[int | None, float | None]:
    """(the highest version due, when the next one comes due) for the live stream; (None, None)
    when nothing is held back (the public follows the run live)."""
    undue = first_undue(session, run_id, now - delay_s) if delay_s > 0 else None
    return (None, None) if undue is None else (undue[0] - 1, undue[1] + delay_s)


def horizon(session: Session, run: Run, delay_s: float, now: float) -> Horizon | None:
    """The bound of ``run``'s public reads under ``delay_s``; None when nothing is held back."""
    if delay_s <= 0:
        return None
    until = now - delay_s
    undue = first_undue(session, run.id, until)
    if undue is None:
        return None
    version = undue[0] - 1
    row = session.execute(
        select(RunVersion.status, RunVersion.last_step)
        .where(RunVersion.run_id == run.id, RunVersion.version <= version)
        .order_by(RunVersion.version.desc()).limit(1)
    ).first()
    frontier: dict[int, int] = {}
    for (ranges,) in session.execute(
        select(RunVersion.ranges).where(RunVersion.run_id == run.id, RunVersion.version > version)
    ):
        for sid, lo, _hi, _n in ranges or ():
            frontier[sid] = min(lo, frontier.get(sid, lo))
    status, last_step = (row[0], row[1]) if row is not None else ("running", None)
    return Horizon(version, until, delay_s, status, last_step, frontier)


def due_last_values(session: Session, run: Run, h: Horizon) -> dict[str, Any]:
    """``run.last_values`` as of the horizon: a held back key's newest due point (or none)."""
    out = dict(run.last_values or {})
    held = {k for k in session.scalars(select(Series.key).where(Series.id.in_(sorted(h.frontier)))) if k in out}
    for key in held:
        del out[key]
    series = session.execute(
        select(Series.id, Series.key).where(Series.run_id == run.id, Series.key.in_(sorted(held)))
    ).all()
    for sid, key in series:
        last = due_last_point(session, sid, h)
        if last is not None and (key not in out or last[0] > out[key][0]):
            out[key] = [last[0], stored_value(last[1])]
    return out


def due_last_point(session: Session, series_id: int, h: Horizon) -> tuple[int, Any] | None:
    """(step, stored value) of the series' highest due step, reading only the held back tail."""
    if series_id not in h.last_points:
        h.last_points[series_id] = _last_point(session, series_id, h)
    return h.last_points[series_id]


def _last_point(session: Session, series_id: int, h: Horizon) -> tuple[int, Any] | None:
    cut = h.frontier.get(series_id)
    q = select(Point.step, Point.value).where(Point.series_id == series_id)
    if cut is not None:
        tail = session.execute(q.where(Point.step >= cut, h.points_due()).order_by(Point.step.desc()).limit(1)).first()
        if tail is not None:
            return int(tail[0]), tail[1]
        q = q.where(Point.step < cut)
    row = session.execute(q.order_by(Point.step.desc()).limit(1)).first()
    return None if row is None else (int(row[0]), row[1])


def due_keys(session: Session, run: Run, h: Horizon, keys: list[str]) -> list[str]:
    """``keys`` without those that have no due point yet (first logged inside the delay)."""
    rows = session.execute(select(Series.id, Series.key).where(Series.run_id == run.id)).all()
    shown: set[str] = set()
    for sid, key in rows:
        if key in shown:
            continue
        if sid not in h.frontier or due_last_point(session, sid, h) is not None:
            shown.add(key)
    return [k for k in keys if k in shown]


def due_segment_steps(session: Session, run: Run, h: Horizon) -> dict[int, int | None]:
    """segment id -> the highest due step of its training series (``Series.max_step`` as of the horizon)."""
    out: dict[int, int | None] = {}
    for sid, seg, max_step in session.execute(
        select(Series.id, Series.segment_id, Series.max_step).where(Series.run_id == run.id, training_series())
    ).all():
        if sid in h.frontier:
            last = due_last_point(session, sid, h)
            max_step = None if last is None else last[0]
        best = out.get(seg)
        out[seg] = best if max_step is None or (best is not None and best >= max_step) else max_step
    return out

