"""Run listing (keyset pagination, newest first) and run summaries / details."""

from __future__ import annotations

import time
from typing import Any

from runcast.wire.events import TIMESTAMP_KEY
from sqlalchemy import ColumnElement, and_, func, literal, or_, select
from sqlalchemy.orm import Session

from runcast_server.core.errors import Invalid
from runcast_server.core.models import Project
from runcast_server.metrics.models import Rollup
from runcast_server.metrics.rollups import LEVELS
from runcast_server.policy.apply import TEAM, View, public_policy, views_for
from runcast_server.policy.delay import due_keys, due_last_values, due_segment_steps
from runcast_server.reads.access import listed_to
from runcast_server.reads.cursor import decode_cursor, encode_cursor
from runcast_server.reads.published import (
    published_code,
    published_config,
    published_env,
    sees_everything,
)
from runcast_server.reads.schemas import (
    LastValue,
    Publication,
    RunDetail,
    RunList,
    RunSummary,
    SegmentInfo,
)
from runcast_server.reads.steps import training_series
from runcast_server.reads.values import strict_json
from runcast_server.record.models import Run, Segment, Series
from runcast_server.runs.models import RunTag
from runcast_server.runs.table import Table, cells, groups, ordering, page_keys
from runcast_server.runs.table import conditions as table_conditions
from runcast_server.runs.tablesql import Values

StallAfter = float | ColumnElement[float]
"""A stall threshold for a list of runs: seconds, or SQL giving each run's (alerts.service.stall_after_sql)."""


def _liveness(stall_after: ColumnElement[float], now: float) -> ColumnElement[bool]:
    """SQL for 'last sign of life is older than the stall threshold'."""
    last_seen = func.coalesce(Run.heartbeat_at, Run.started_at, Run.created_at)
    return last_seen < now - stall_after


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
    run: Run, project: str, *, stall_after_s: float, now: float, tags: list[str] | None = None, view: View = TEAM,
    session: Session | None = None,
) -> RunSummary:
    """A run's summary line; a delayed view (``view.horizon``, ``session`` given) shows the
    run as of its horizon: status, last step and last values then (policy/delay.py)."""
    h = view.horizon
    status = effective_status(run, stall_after_s, now)
    last_step, last_values, finished_at = run.last_step, run.last_values, run.finished_at
    if h is not None:
        if h.status != run.status:
            status, finished_at = h.status, None if h.status == "running" else finished_at
        last_step = h.last_step
        last_values = due_last_values(session, run, h) if session is not None else {}
    return RunSummary(
        id=run.id,
        project=project,
        name=run.name,
        # str columns into the model's Literal fields, which pydantic checks at runtime.
        status=status,  # type: ignore[arg-type]
        visibility=run.visibility,  # type: ignore[arg-type]
        created_at=run.created_at,
        started_at=run.started_at,
        finished_at=finished_at,
        heartbeat_at=run.heartbeat_at,
        heartbeat_age_s=None
        if run.heartbeat_at is None
        else max(0.0, now - run.heartbeat_at),
        last_step=last_step,
        last_values=view.by_key(_last_values(last_values)),
        tags=tags or [],
        group=run.group_name,
        job_type=run.job_type,
        archived_at=run.archived_at,
    )


def run_tags(session: Session, run_ids: list[str]) -> dict[str, list[str]]:
    """Each run's tags, sorted (runs without tags are left out)."""
    out: dict[str, list[str]] = {}
    if run_ids:
        rows = session.execute(
            select(RunTag.run_id, RunTag.tag).where(RunTag.run_id.in_(run_ids)).order_by(RunTag.run_id, RunTag.tag)
        )
        for run_id, tag in rows:
            out.setdefault(run_id, []).append(tag)
    return out


def _status_condition(status: str, stall_after: ColumnElement[float], now: float) -> ColumnElement[bool]:
    if status == "stalled":
        return and_(Run.status == "running", _liveness(stall_after, now))
    if status == "running":
        return and_(Run.status == "running", ~_liveness(stall_after, now))
    return Run.status == status


def list_runs(
    session: Session,
    *,
    viewer: Project | None,
    project: str | None,
    status: str | None,
    limit: int,
    tag: str | None = None,
    group: str | None = None,
    cursor: str | None,
    stall_after: StallAfter,
    archived: str = "exclude",
    table: Table | None = None,
    as_of: float | None = None,
) -> RunList:
    """One page of the runs the viewer may see, newest first unless ``table`` sorts or groups.

    Newest first is ordered by (created_at, id) descending; the cursor holds the last row's key,
    so rows inserted while a client pages never cause duplicates or gaps. A sorted or grouped
    table pages by offset, among the runs created at or before ``as_of`` (the first page's time,
    which the page returns), so runs created meanwhile never shift a later page. ``archived``:
    ``exclude`` (archived runs left out), ``include`` or ``only``.
    """
    now = time.time()
    table = table or Table()
    values = Values(session, viewer)
    threshold = stall_after if isinstance(stall_after, ColumnElement) else literal(float(stall_after))
    where: list[ColumnElement[bool]] = [listed_to(viewer)]
    if project is not None:
        where.append(Project.name == project)
    if archived == "exclude":
        where.append(Run.archived_at.is_(None))
    elif archived == "only":
        where.append(Run.archived_at.is_not(None))
    if status is not None:
        where.append(_status_condition(status, threshold, now))
    if group is not None:
        where.append(Run.group_name == group)
    if tag is not None:
        where.append(select(RunTag.run_id).where(RunTag.run_id == Run.id, RunTag.tag == tag).exists())
    if as_of is None and not table.keyset:
        as_of = now
    if as_of is not None:
        where.append(Run.created_at <= as_of)
    where += table_conditions(values, table)
    order = ordering(values, table)
    query = select(Run.id).join(Project, Project.id == Run.project_id).where(*where)
    if cursor is not None:
        if not table.keyset:
            raise Invalid("a cursor pages the newest-first list: with sort or group_by, page by offset", field="cursor")
        created, run_id = decode_cursor(cursor)
        query = query.where(
            or_(
                Run.created_at < created,
                and_(Run.created_at == created, Run.id < run_id),
            )
        )
    # The page's ids first (the sort handles narrow rows), then those runs in full.
    ids = list(session.scalars(query.order_by(*order).offset(table.offset).limit(limit + 1)))
    found = {row[0].id: row for row in session.execute(
        select(Run, Project.name, threshold.label("stall_after_s")).join(Project, Project.id == Run.project_id)
        .where(Run.id.in_(ids[:limit]))
    ).all()} if ids else {}
    page = [found[i] for i in ids[:limit] if i in found]
    next_cursor = next_offset = None
    if len(ids) > limit:
        if table.keyset:
            last = page[-1][0]
            next_cursor = encode_cursor(last.created_at, last.id)
        else:
            next_offset = table.offset + limit
    tags = run_tags(session, [run.id for run, _, _ in page])
    views = views_for(session, [run for run, _, _ in page], viewer)
    shown = []
    for run, name, after in page:
        summary = summarize(run, name, stall_after_s=after, now=now, tags=tags.get(run.id), view=views[run.id],
                            session=session)
        full = sees_everything(run, viewer)
        summary.values = cells(run, summary, views[run.id], full, table.columns)
        shown.append((run, summary, views[run.id], full))
    if status is not None:  # a delayed run is listed under its status as of its horizon (the page may be shorter)
        shown = [x for x in shown if x[2].horizon is None or x[1].status == status]
    return RunList(
        runs=[summary for _, summary, _, _ in shown], next_cursor=next_cursor, next_offset=next_offset,
        as_of=None if table.keyset else as_of,
        groups=groups(session, values, table, where) if table.group_by else None,
        keys=page_keys(shown) if table.keys else None,
    )


def run_detail(
    session: Session, run: Run, project: str, *, stall_after_s: float, full: bool = False, view: View = TEAM
) -> RunDetail:
    """A run's summary plus its config, code, environment, metric keys and segments
    (``full``: with its paths, host and pid, reads/published.py; ``view``: what the
    publication policy shows this reader, policy/apply.py)."""
    summary = summarize(run, project, stall_after_s=stall_after_s, now=time.time(),
                        tags=run_tags(session, [run.id]).get(run.id), view=view, session=session)
    public = view if not view.team else public_policy(session, run.id)  # what the page says is withheld
    h = view.horizon
    version = h.version if h is not None else run.version  # read with the run, before what follows: a lower bound
    keys = session.scalars(
        select(Series.key)
        .where(Series.run_id == run.id, Series.key != TIMESTAMP_KEY)  # the server's step times: not a logged metric
        .distinct()
        .order_by(Series.key)
    ).all()
    last_steps = dict(
        session.execute(
            select(Series.segment_id, func.max(Series.max_step))
            .where(Series.run_id == run.id, training_series())
            .group_by(Series.segment_id)
        ).all()
    ) if h is None else due_segment_steps(session, run, h)
    if h is not None:
        keys = due_keys(session, run, h, list(keys))
    segments = session.scalars(
        select(Segment).where(Segment.run_id == run.id).order_by(Segment.index)
    ).all()
    return RunDetail(
        **summary.model_dump(),
        config=view.config(published_config(strict_json(run.config or {}), full)),
        code=view.code(published_code(strict_json(run.code or {}), full)),
        env=view.env(published_env(strict_json(run.env or {}), full)),
        public_paths=bool(run.public_paths),
        seed=run.seed,
        version=version,
        keys=view.keys(list(keys)),
        segments=[
            SegmentInfo(
                index=s.index,
                start_step=s.start_step,
                resumed=s.resumed,
                started_at=s.started_at,
                last_step=last_steps.get(s.id),
                lost_events=s.lost_events,
                spooled_events=s.spooled_events,
                spooled_at=s.spooled_at,
            )
            for s in segments
        ],
        lost_events=sum(s.lost_events for s in segments),
        spooled_events=sum(s.spooled_events for s in segments),
        notes=run.notes if view.event_shown("note") else None,
        summary=view.by_key(published_config(strict_json(_summary(session, run, view)), full)),
        metrics=view.by_key(dict(run.metric_defs or {})),
        publication=Publication(policy=public.policy, withheld=public.withheld()),
    )


def _summary(session: Session, run: Run, view: View = TEAM) -> dict[str, Any]:
    """run.summary over the declared metrics' figures (min/max from the coarsest rollups, last from last_values).

    A delayed view gets only the figures of its horizon: no min/max of a key with points held back."""
    figures: dict[str, Any] = {}
    wanted = {k: d.get("summary") for k, d in (run.metric_defs or {}).items() if d.get("summary") in ("min", "max", "last")}
    h = view.horizon
    if h is not None:
        held = set(session.scalars(select(Series.key).where(Series.id.in_(sorted(h.frontier)))))
        wanted = {k: how for k, how in wanted.items() if how == "last" or k not in held}
    last = _last_values(run.last_values if h is None else due_last_values(session, run, h))
    extremes = {k for k, how in wanted.items() if how in ("min", "max")}
    if extremes:
        # The series ids as constants, so PostgreSQL reads only this run's rollups partition.
        key_of = dict(session.execute(
            select(Series.id, Series.key).where(Series.run_id == run.id, Series.key.in_(sorted(extremes)))
        ).all())
        rows = session.execute(
            select(Rollup.series_id, Rollup.min, Rollup.max)
            .where(Rollup.series_id.in_(sorted(key_of)), Rollup.level == LEVELS[-1])
        ).all() if key_of else []
        bounds: dict[str, list[float | None]] = {}
        for sid, low, high in rows:
            bounds.setdefault(key_of[sid], []).append(low if wanted[key_of[sid]] == "min" else high)
        for key, values in bounds.items():
            present = [v for v in values if v is not None]
            if present:
                figures[key] = min(present) if wanted[key] == "min" else max(present)
    for key, how in wanted.items():
        if how == "last" and key in last:
            figures[key] = last[key].value
    return {**figures, **(run.summary or {})}
