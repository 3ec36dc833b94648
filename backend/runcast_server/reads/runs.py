"""Run listing (keyset pagination, newest first) and run summaries / details."""

from __future__ import annotations

import time
from typing import Any

from sqlalchemy import Select, and_, func, or_, select
from sqlalchemy.orm import Session

from runcast_server.models import Project, Run, Segment, Series
from runcast_server.reads.access import listed_to
from runcast_server.reads.cursor import decode_cursor, encode_cursor
from runcast_server.reads.schemas import (
    LastValue,
    RunDetail,
    RunList,
    RunSummary,
    SegmentInfo,
)
from runcast_server.reads.published import published_code, published_config, published_env
from runcast_server.reads.values import strict_json

_CURSOR_TYPES = (float, str)


def _liveness(stall_after_s: float, now: float):  # type: ignore[no-untyped-def]
    """SQL for 'last sign of life is older than the stall threshold'."""
    last_seen = func.coalesce(Run.heartbeat_at, Run.started_at, Run.created_at)
    return last_seen < now - stall_after_s


def effective_status(run: Run, stall_after_s: float, now: float) -> str:
    """The stored status, except a running run silent for longer than ``stall_after_s`` is 'stalled'."""
    if run.status != "running":
        return run.status
    last_seen = run.heartbeat_at or run.started_at or run.created_at
    return "stalled" if last_seen < now - stall_after_s else "running"


def _last_values(raw: dict[str, Any] | None) -> dict[str, LastValue]:
    out: dict[str, LastValue] = {}
    for key, entry in (raw or {}).items():
        if isinstance(entry, dict):
            step, value = entry.get("step"), entry.get("value")
        elif isinstance(entry, (list, tuple)) and len(entry) == 2:
            step, value = entry
        else:
            continue
        if not isinstance(step, int):
            continue
        out[key] = LastValue(
            step=step, value="NaN" if value is None else strict_json(value)
        )
    return out


def summarize(
    run: Run, project: str, *, stall_after_s: float, now: float
) -> RunSummary:
    return RunSummary(
        id=run.id,
        project=project,
        name=run.name,
        status=effective_status(run, stall_after_s, now),  # type: ignore[arg-type]
        visibility=run.visibility,  # type: ignore[arg-type]
        created_at=run.created_at,
        started_at=run.started_at,
        finished_at=run.finished_at,
        heartbeat_at=run.heartbeat_at,
        heartbeat_age_s=None
        if run.heartbeat_at is None
        else max(0.0, now - run.heartbeat_at),
        last_step=run.last_step,
        last_values=_last_values(run.last_values),
    )


def _status_filter(
    query: Select[*tuple[Any, ...]], status: str, stall_after_s: float, now: float
) -> Select[*tuple[Any, ...]]:
    if status == "stalled":
        return query.where(Run.status == "running", _liveness(stall_after_s, now))
    if status == "running":
        return query.where(Run.status == "running", ~_liveness(stall_after_s, now))
    return query.where(Run.status == status)


def list_runs(
    session: Session,
    *,
    viewer: Project | None,
    project: str | None,
    status: str | None,
    limit: int,
    cursor: str | None,
    stall_after_s: float,
) -> RunList:
    """One page of the runs the viewer may see, newest first.

    Ordered by (created_at, id) descending; the cursor holds the last row's key,
    so rows inserted while a client pages never cause duplicates or gaps.
    """
    now = time.time()
    query = (
        select(Run, Project.name)
        .join(Project, Project.id == Run.project_id)
        .where(listed_to(viewer))
    )
    if project is not None:
        query = query.where(Project.name == project)
    if status is not None:
        query = _status_filter(query, status, stall_after_s, now)
    if cursor is not None:
        created, run_id = decode_cursor(cursor, _CURSOR_TYPES)
        query = query.where(
            or_(
                Run.created_at < created,
                and_(Run.created_at == created, Run.id < run_id),
            )
        )
    rows = session.execute(
        query.order_by(Run.created_at.desc(), Run.id.desc()).limit(limit + 1)
    ).all()
    page = rows[:limit]
    next_cursor = None
    if len(rows) > limit:
        last = page[-1][0]
        next_cursor = encode_cursor(last.created_at, last.id)
    return RunList(
        runs=[
            summarize(run, name, stall_after_s=stall_after_s, now=now)
            for run, name in page
        ],
        next_cursor=next_cursor,
    )


def run_detail(
    session: Session, run: Run, project: str, *, stall_after_s: float, full: bool = False
) -> RunDetail:
    """A run's summary plus its config, code, environment, metric keys and segments
    (``full``: with its paths, host and pid, reads/published.py)."""
    summary = summarize(run, project, stall_after_s=stall_after_s, now=time.time())
    keys = session.scalars(
        select(Series.key)
        .where(Series.run_id == run.id)
        .distinct()
        .order_by(Series.key)
    ).all()
    last_steps = dict(
        session.execute(
            select(Series.segment_id, func.max(Series.max_step))
            .where(Series.run_id == run.id)
            .group_by(Series.segment_id)
        ).all()
    )
    segments = session.scalars(
        select(Segment).where(Segment.run_id == run.id).order_by(Segment.index)
    ).all()
    return RunDetail(
        **summary.model_dump(),
        config=published_config(strict_json(run.config or {}), full),
        code=published_code(strict_json(run.code or {}), full),
        env=published_env(strict_json(run.env or {}), full),
        public_paths=bool(run.public_paths),
        seed=run.seed,
        keys=list(keys),
        segments=[
            SegmentInfo(
                index=s.index,
                start_step=s.start_step,
                resumed=s.resumed,
                started_at=s.started_at,
                last_step=last_steps.get(s.id),
                lost_events=s.lost_events,
            )
            for s in segments
        ],
        lost_events=sum(s.lost_events for s in segments),
    )
