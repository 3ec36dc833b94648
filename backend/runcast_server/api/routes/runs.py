"""``GET /runs`` (listing) and ``GET /runs/{run_id}`` (detail)."""

from __future__ import annotations

from typing import Annotated, Literal

from fastapi import APIRouter, Query
from pydantic import StringConstraints
from runcast.wire.events import MAX_TS

from runcast_server.alerts.service import stall_after, stall_after_sql
from runcast_server.api.deps import SessionDep, ViewerDep
from runcast_server.api.one_hop import Reading, RunReadDep
from runcast_server.api.read_deps import (
    RUN_ERRORS,
    SettingsDep,
)
from runcast_server.core.errors import error_responses
from runcast_server.reads.cursor import RUN_CURSOR
from runcast_server.reads.schemas import RunDetail, RunList, RunStatus
from runcast_server.runs import queries as reads
from runcast_server.runs.columns import COLUMN_PATTERN, parse_column, parse_filter
from runcast_server.runs.table import Table

router = APIRouter(tags=["runs"])
TEXT_FILTER = r"^[^\x00-\x1f\x7f]+$"  # what a tag or group can hold (runcast.wire.events)
MAX_COLUMNS = 30
MAX_FILTERS = 20


@router.get("/runs", response_model=RunList, responses=error_responses(401, 422))
def list_runs(
    session: SessionDep,
    viewer: ViewerDep,
    settings: SettingsDep,
    project: Annotated[
        str | None, Query(max_length=100, description="Only runs of this project.")
    ] = None,
    status: Annotated[
        RunStatus | None, Query(description="Only runs with this status.")
    ] = None,
    tag: Annotated[str | None, Query(min_length=1, max_length=64, pattern=TEXT_FILTER, description="Only runs with this tag.")] = None,
    group: Annotated[str | None, Query(min_length=1, max_length=128, pattern=TEXT_FILTER, description="Only runs of this group.")] = None,
    limit: Annotated[int, Query(ge=1, le=200, description="Runs per page.")] = 50,
    cursor: Annotated[
        str | None,
        Query(pattern=RUN_CURSOR, description="next_cursor of the previous page, unchanged."),
    ] = None,
    archived: Annotated[
        Literal["exclude", "include", "only"],
        Query(description="Archived runs: left out (default), included, or only them."),
    ] = "exclude",
    column: Annotated[list[Annotated[str, StringConstraints(pattern=COLUMN_PATTERN)]], Query(max_length=MAX_COLUMNS, description=(
        "Columns whose values each run lists under values (repeat for several): config.<key>, summary.<key>, "
        "metric.<key> (last value); with group_by, the numeric columns are aggregated."))] = [],  # noqa: B006
    filter: Annotated[list[Annotated[str, StringConstraints(max_length=600)]], Query(max_length=MAX_FILTERS, description=(
        'Only runs matching all of these JSON arrays [column, op, value], op one of eq, ne, lt, le, gt, ge: '
        '["config.lr", "le", 0.001], ["config.optimizer", "eq", "adam"], ["created_at", "ge", 1767225600].'
    ))] = [],  # noqa: B006
    sort: Annotated[str | None, Query(pattern=COLUMN_PATTERN, description=(
        "Order by this column (a run field such as name, status, last_step, created_at, or config.<key>, "
        "summary.<key>, metric.<key>); runs without a value last. Pages then go by offset."))] = None,
    order: Annotated[Literal["asc", "desc"], Query(description="The sort's direction.")] = "desc",
    offset: Annotated[int, Query(ge=0, le=100_000, description="With sort or group_by: next_offset of the previous page.")] = 0,
    as_of: Annotated[float | None, Query(ge=0, le=MAX_TS, description=(
        "With sort or group_by: as_of of the first page, unchanged, with each offset: only runs created at or "
        "before it, so runs created while you page never shift a page."))] = None,
    group_by: Annotated[Literal["group"] | None, Query(description=(
        "Order by group first and list every group's count and aggregates (min, mean, max of each numeric column)."
    ))] = None,
    keys: Annotated[bool, Query(description="List the config, summary and metric keys of this page's runs.")] = False,
) -> RunList:
    """Runs newest first (or sorted, filtered, grouped as a table): public ones, plus every run of the
    project whose token is presented. Values a run's publication policy withholds from the reader
    neither match a filter nor sort."""
    table = Table(
        columns=[parse_column(c, "column") for c in column],
        filters=[parse_filter(f, "filter") for f in filter],
        sort=None if sort is None else parse_column(sort, "sort"),
        order=order, offset=offset, group_by=group_by, keys=keys,
    )
    return reads.list_runs(
        session,
        viewer=viewer,
        project=project,
        status=status,
        tag=tag,
        group=group,
        limit=limit,
        cursor=cursor,
        stall_after=stall_after_sql(settings.stall_after_s),
        archived=archived,
        as_of=as_of,
        table=table,
    )


@router.get("/runs/{run_id}", response_model=RunDetail, responses=RUN_ERRORS)
async def get_run(read: RunReadDep) -> RunDetail:
    """A run's summary, config, code, environment, metric keys and segments. Paths, host
    and pid only for a token of the run's project or a run with ``public_paths``; what the run's
    publication policy withholds only for a token of its project (``publication`` says what)."""
    def detail(r: Reading) -> RunDetail:
        after = stall_after(r.session, r.run.id, r.context.settings.stall_after_s)
        return reads.run_detail(r.session, r.run, r.project, stall_after_s=after, full=r.full, view=r.view())

    return await read(detail)
