"""Reading versions back from the run_versions log: replays, catch-ups and the delayed public side."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Final, TypeVar

from sqlalchemy import select, union_all
from sqlalchemy.orm import Session
from starlette.concurrency import run_in_threadpool

from runcast_server.core.db import Database
from runcast_server.core.settings import Settings
from runcast_server.outputs.stream import KINDS, stream_entries
from runcast_server.policy.apply import TEAM, View, public_policy
from runcast_server.reads.values import stored_value, strict_json
from runcast_server.record.models import Event, Point, Run, RunVersion, Segment, Series

_RANGES_PER_QUERY: Final = 50
_FIELDS: Final = Settings.model_fields  # the defaults of RUNCAST_STREAM_REPLAY_MAX_*
T = TypeVar("T")


@dataclass
class Replay:
    """Versions ``(after, current]`` of a run as messages; ``messages`` is None when a
    reset is due (too far behind, ahead of the run, or the log does not cover the range).
    Event payloads are as stored: ``batch_frame`` publishes them for each kind of reader."""

    current: int
    messages: list[dict[str, Any]] | None = field(default_factory=list)
    public_paths: bool = False  # the run shows its paths, host and pid to every reader
    policy: View = TEAM  # what its publication policy shows readers outside its project


def current_version(session: Session, run_id: str) -> int:
    return session.scalar(select(Run.version).where(Run.id == run_id)) or 0


def _run_position(session: Session, run_id: str) -> tuple[int, bool]:
    row = session.execute(select(Run.version, Run.public_paths).where(Run.id == run_id)).first()
    return (0, False) if row is None else (row[0] or 0, bool(row[1]))


def read_versions(
    session: Session,
    run_id: str,
    after: int,
    *,
    max_versions: int = _FIELDS["stream_replay_max_versions"].default,
    max_points: int = _FIELDS["stream_replay_max_points"].default,
    upto: int | None = None,
    unlogged_empty: bool = False,
) -> Replay:
    """Every version of ``run_id`` after ``after`` up to the run's current one (or ``upto``, when
    lower: a delayed run's public side), as stream messages.

    ``unlogged_empty``: a version without a log row (a policy change) has no message instead of
    making the replay a reset (the broadcast's pieces, whose URLs carry the policy).

    Cost: one read of the run row, of at most ``max_versions`` log rows, one range scan
    of the points primary key per (series, run of consecutive ranges), one read of the
    events by id and one of each outputs table (samples, evals, media) by id.
    """
    current, public_paths = _run_position(session, run_id)
    if upto is not None:
        current = min(current, upto)
    policy = public_policy(session, run_id)
    if after == current:
        return Replay(current, public_paths=public_paths, policy=policy)
    if after > current or current - after > max_versions:
        return Replay(current, None, public_paths, policy)
    logs: list[RunVersion] = list(session.execute(
        select(RunVersion)
        .where(RunVersion.run_id == run_id, RunVersion.version > after, RunVersion.version <= current)
        .order_by(RunVersion.version)
    ).scalars())
    if not unlogged_empty and [r.version for r in logs] != list(range(after + 1, current + 1)):
        # versions written without a log row (older data, a policy change): reload
        return Replay(current, None, public_paths, policy)
    if sum(r.points for r in logs) > max_points:
        return Replay(current, None, public_paths, policy)
    points = _read_points(session, run_id, logs, after, current)
    events = _read_events(session, [i for r in logs for i in r.event_ids])
    outputs = stream_entries(session, (r.outputs for r in logs))
    messages = [
        {
            "run": run_id,
            "version": r.version,
            "status": r.status,
            "last_step": r.last_step,
            "points": points.get(r.version, []),
            "events": [events[i] for i in r.event_ids if i in events],
            **{kind: [outputs[kind][i] for i in (r.outputs or {}).get(kind, ()) if i in outputs[kind]]
               for kind in KINDS},
            "described": bool(r.described),  # the run's name, tags, group or notes changed: read it again
            "committed_at": r.committed_at,  # not sent (batch_frame): a delayed run's public side times it
        }
        for r in logs
    ]
    return Replay(current, messages, public_paths, policy)


def _scan_groups(logs: list[RunVersion]) -> list[tuple[int, int, int]]:
    """(series_id, first_step, last_step) to scan: consecutive versions' ranges of a series
    are merged while steps move forward (the usual case), so a replay of N versions of a
    run logging K keys costs about K range scans, not N * K."""
    groups: dict[int, list[list[int]]] = {}
    for r in logs:
        for sid, lo, hi, _n in r.ranges:
            spans = groups.setdefault(sid, [])
            if spans and lo > spans[-1][1]:
                spans[-1][1] = hi
            else:
                spans.append([lo, hi])
    return [(sid, lo, hi) for sid, spans in sorted(groups.items()) for lo, hi in spans]


def _read_points(
    session: Session, run_id: str, logs: list[RunVersion], after: int, upto: int
) -> dict[int, list[dict[str, Any]]]:
    """version -> ``[{"key", "segment", "step": [...], "value": [...]}]`` (wire values, steps ascending)."""
    groups = _scan_groups(logs)
    if not groups:
        return {}
    p = Point.__table__.c
    rows: list[Any] = []
    for i in range(0, len(groups), _RANGES_PER_QUERY):
        selects = [
            select(p.series_id, p.step, p.value, p.version).where(
                p.series_id == sid, p.step >= lo, p.step <= hi, p.version > after, p.version <= upto
            )
            for sid, lo, hi in groups[i : i + _RANGES_PER_QUERY]
        ]
        stmt = selects[0] if len(selects) == 1 else union_all(*selects)
        rows.extend(session.execute(stmt).all())
    sids = sorted({g[0] for g in groups})
    names = {
        sid: (key, index)
        for sid, key, index in session.execute(
            select(Series.id, Series.key, Segment.index)
            .join(Segment, Segment.id == Series.segment_id)
            .where(Series.run_id == run_id, Series.id.in_(sids))
        )
    }
    # Scan ranges of one series may overlap (a late batch inside an earlier span): one row per point.
    unique = {(r[0], r[1]): r for r in rows}
    cols: dict[int, dict[int, tuple[list[int], list[Any]]]] = {}
    for sid, step, value, version in sorted(unique.values(), key=lambda r: (r[3], r[0], r[1])):
        steps, values = cols.setdefault(version, {}).setdefault(sid, ([], []))
        steps.append(step)
        values.append(stored_value(value))
    out: dict[int, list[dict[str, Any]]] = {}
    for version, series in cols.items():
        entries = []
        for sid, (steps, values) in series.items():
            key, segment = names[sid]
            entries.append({"key": key, "segment": segment, "step": steps, "value": values})
        entries.sort(key=lambda e: (e["segment"], e["key"]))
        out[version] = entries
    return out


def _read_events(session: Session, ids: list[int]) -> dict[int, dict[str, Any]]:
    """Timeline events by id, shaped as in ``GET /runs/{id}/events`` (payloads as stored)."""
    if not ids:
        return {}
    rows = session.execute(
        select(Event, Segment.index).join(Segment, Segment.id == Event.segment_id).where(Event.id.in_(ids))
    ).all()
    return {
        e.id: {
            "id": e.id,
            "type": e.type,
            "segment": index,
            "seq": e.seq,
            "step": e.step,
            "ts": e.ts,
            "received_at": e.received_at,
            "payload": strict_json(e.payload or {}),
        }
        for e, index in rows
    }


def _in_session(database: Database, fn: Callable[[Session], T]) -> T:
    with database.scope() as session:
        return fn(session)


async def db(database: Database, fn: Callable[[Session], T]) -> T:
    """Run ``fn(session)`` in the threadpool with a short-lived session of ``database``."""
    return await run_in_threadpool(_in_session, database, fn)
