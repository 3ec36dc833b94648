"""``GET /api/v1/whoami``: the SDK's one request at ``init()`` (token, project, a resumed run's last step,
the largest batch this server takes, in events and in bytes)."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Query
from pydantic import BaseModel, Field
from runcast.wire.events import EVENT_TYPES, ID_RE, MAX_BATCH_EVENTS
from sqlalchemy import select

from runcast_server.api.deps import GrantDep, SessionDep
from runcast_server.api.read_deps import SettingsDep
from runcast_server.core.errors import ApiError, error_responses
from runcast_server.record.models import Run

router = APIRouter(tags=["ingest"])


class StoredRun(BaseModel):
    id: str
    last_step: int | None = Field(description="The highest step stored for the run (any segment); null if none.")
    status: str


class WhoAmI(BaseModel):
    project: str = Field(description="The project the token writes to.")
    scopes: list[str] = Field(description="What the token may do: `read`, `ingest`, `team` (docs/auth.md#scopes). "
                                          "`runcast.init` needs `ingest`.")
    run: StoredRun | None = Field(description="The run named by ?run=, when the token's project holds it.")
    max_batch_events: int = Field(
        default=MAX_BATCH_EVENTS,
        description="The most events a batch may hold here. An SDK that is not told (a server before this field) "
                    "sends at most 1000.",
    )
    event_types: list[str] = Field(
        default=list(EVENT_TYPES),
        description="The event types this server takes. An SDK sends `metrics_columns` (a dense series as "
                    "columns, docs/ingest.md#columnar-metrics) only to a server that lists it.",
    )
    max_body_bytes: int = Field(
        description="The largest ingest request body here (RUNCAST_MAX_BODY_BYTES). An SDK cuts its batches "
                    "below it (and below its own 8 MiB).",
    )


@router.get("/whoami", response_model=WhoAmI, responses=error_responses(401, 409, 422))
def whoami(
    session: SessionDep,
    settings: SettingsDep,
    grant: GrantDep,
    run: Annotated[
        str | None,
        Query(min_length=8, max_length=64, pattern=ID_RE.pattern, description="A run id the SDK starts or resumes."),
    ] = None,
) -> WhoAmI:
    """The token's project, and the stored state of run ``run`` if it is the project's: what ``runcast.init``
    asks before it logs anything, and the token's scopes (any scope may ask). 401: bad or revoked
    token. 409: another project holds that run id."""
    project = grant.project
    stored = None
    if run is not None:
        row = session.scalar(select(Run).where(Run.id == run))
        if row is not None and row.project_id != project.id:
            raise ApiError(409, f"run id {run!r} is taken by another project", field="run")
        if row is not None:
            stored = StoredRun(id=row.id, last_step=row.last_step, status=row.status)
    return WhoAmI(project=project.name, scopes=list(grant.scopes), run=stored, max_body_bytes=settings.max_body_bytes)
