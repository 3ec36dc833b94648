"""``GET /runs/{run_id}/alerts`` (public-read like the other run reads) and the run's
detector configuration (``GET``, and ``PUT`` with the project's token)."""

from __future__ import annotations

import time
from typing import Annotated, Any, Literal

from fastapi import APIRouter, Body, Query, Request
from runcast.wire.events import MAX_ALERTS_BYTES, check_json

from runcast_server.alerts import service
from runcast_server.alerts.models import AlertConfig
from runcast_server.alerts.schemas import AlertConfigView, AlertPage
from runcast_server.api.deps import SessionDep, TeamDep
from runcast_server.api.documented import json_body
from runcast_server.api.one_hop import Reading, RunReadDep
from runcast_server.api.read_deps import (
    RUN_ERRORS,
    AfterDep,
    ReadableRunDep,
    SettingsDep,
)
from runcast_server.core.errors import ApiError, NotFound, error_responses
from runcast_server.detectors import config as dconfig

router = APIRouter(tags=["alerts"])

AlertKind = Literal["spike", "nonfinite", "grad_norm", "plateau", "divergence", "throughput", "stall", "restart_loop"]
AlertState = Literal["open", "closed"]


def base_url(request: Request, settings: Any) -> str:
    return settings.public_url or str(request.base_url).rstrip("/")


@router.get("/runs/{run_id}/alerts", response_model=AlertPage, response_model_exclude_unset=True,
            responses=RUN_ERRORS)
async def get_alerts(
    request: Request,
    read: RunReadDep,
    after: AfterDep,
    kind: Annotated[list[AlertKind] | None, Query(description="Only these kinds (repeatable).")] = None,
    state: Annotated[list[AlertState] | None, Query(description="Only open or closed alerts.")] = None,
    limit: Annotated[int, Query(ge=1, le=1000)] = 100,
) -> dict[str, Any]:
    """The run's alerts, oldest first, each with its evidence and the checkpoints around it."""
    def alerts(r: Reading) -> dict[str, Any]:
        policy = r.view()
        if not policy.alerts:
            return {"alerts": [], "next_cursor": None, "withheld": True}
        page = service.list_alerts(r.session, r.run, r.project, kinds=list(kind) if kind else None,
                                   states=list(state) if state else None, after=after, limit=limit,
                                   base_url=base_url(request, r.context.settings), full=r.full,
                                   until=policy.until)
        return {**page, "alerts": [a for a in page["alerts"] if policy.alert(a)], "withheld": False}

    return await read(alerts)


@router.get("/runs/{run_id}/alerts/config", response_model=AlertConfigView, responses=RUN_ERRORS)
def get_alert_config(session: SessionDep, settings: SettingsDep, found: ReadableRunDep) -> dict[str, Any]:
    """The run's overrides and the effective detector parameters (``stall.after_s`` also decides
    when the run reads as 'stalled')."""
    run, _ = found
    row = session.get(AlertConfig, run.id)
    overrides = row.overrides if row else {}
    return {"overrides": overrides, "effective": dconfig.effective(overrides, stall_after_s=settings.stall_after_s)}


@router.put("/runs/{run_id}/alerts/config", response_model=AlertConfigView,
            responses={**RUN_ERRORS, **error_responses(400)}, openapi_extra=json_body(dconfig.overrides_schema()))
def put_alert_config(
    session: SessionDep,
    settings: SettingsDep,
    writer: TeamDep,
    found: ReadableRunDep,
    overrides: Annotated[dict[str, Any], Body(description="Overrides merged over the current ones.")],
    replace: Annotated[bool, Query(description="Replace the overrides instead of merging.")] = False,
) -> dict[str, Any]:
    """Change a run's detector parameters (the project's ingest token is required)."""
    run, _ = found
    if run.project_id != writer.id:
        raise NotFound("run", field="run")  # another project's run: as if it did not exist
    check_json(overrides, "overrides", MAX_ALERTS_BYTES)  # text, depth, integers (422 naming the field)
    try:
        checked = dconfig.validate_overrides(overrides)
    except dconfig.ConfigError as exc:
        raise ApiError(422, exc.message, field=exc.field) from None
    row = session.get(AlertConfig, run.id)
    merged = checked if replace or row is None else dconfig.merge_overrides(row.overrides, checked)
    if row is None:
        session.add(AlertConfig(run_id=run.id, overrides=merged, updated_at=time.time()))
    else:
        row.overrides, row.updated_at = merged, time.time()
    return {"overrides": merged, "effective": dconfig.effective(merged, stall_after_s=settings.stall_after_s)}
