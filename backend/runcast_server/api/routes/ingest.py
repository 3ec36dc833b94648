"""``POST /api/v1/ingest``: accept a batch of events for the token's project.

The request is checked in full (size, JSON, schema, runs and project) before
anything is written; then the batch's run_started events are registered at once
(so the next batch can be checked against them) and the batch is handed to the
ingest task. 202 means "queued"; storage is idempotent, so the SDK may resend.
"""

from __future__ import annotations

import json
import logging
import time
from typing import Any

from fastapi import APIRouter, Request
from fastapi.concurrency import run_in_threadpool
from kombu.exceptions import OperationalError as BrokerError
from pydantic import BaseModel
from sqlalchemy.orm import Session

from runcast.events import EventError, encode_event, validate_batch
from runcast_server.api.deps import SessionDep, WriterDep
from runcast_server.api.ingest_doc import BODY_DOC
from runcast_server.errors import RETRY_AFTER_S, ApiError, error_responses
from runcast_server.ingest import IngestRejected, check_batch, register_runs
from runcast_server.tasks import enqueue_ingest

router = APIRouter(tags=["ingest"])
log = logging.getLogger(__name__)


class Accepted(BaseModel):
    accepted: int


def _reject_constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON; send non-finite numbers as strings")


def _parse(body: bytes) -> Any:
    try:
        return json.loads(body, parse_constant=_reject_constant)
    except (ValueError, UnicodeDecodeError) as exc:
        raise ApiError(400, f"body is not valid JSON: {exc}", field="body") from exc
    except RecursionError:
        raise ApiError(400, "body is nested too deeply to be a batch", field="body") from None


def _accept(session: Session, project_id: int, body: bytes, received_at: float) -> int:
    """Parse and check the batch, register new runs, commit, then enqueue; returns the event count."""
    try:
        events = validate_batch(_parse(body))
    except EventError as exc:
        raise ApiError(422, exc.message, field=exc.field, index=exc.index) from exc
    try:
        check_batch(session, project_id, events)
    except IngestRejected as exc:
        raise ApiError(exc.status, exc.message, field=exc.field, index=exc.index) from exc
    register_runs(session, project_id, events, received_at=received_at)
    session.commit()  # visible to the ingest task (and to the next batch's checks)
    try:
        enqueue_ingest([encode_event(e) for e in events], project_id, received_at=received_at)
    except BrokerError as exc:
        log.warning("ingest: broker unreachable: %s", exc)
        raise ApiError(503, "ingest queue unavailable; retry later", headers={"Retry-After": str(RETRY_AFTER_S)}) from exc
    return len(events)


@router.post("/ingest", status_code=202, response_model=Accepted,
             responses=error_responses(400, 401, 403, 404, 409, 422), openapi_extra=BODY_DOC)
async def ingest(request: Request, project: WriterDep, session: SessionDep) -> Accepted:
    """Queue a batch ``{"v": 1, "events": [...]}`` for the token's project.

    Errors are ``{"error": {"message", "field", "index"?}}``: 400 not JSON, 401 token,
    403 a run_started naming another project, 404 unknown run or segment (another
    project's run answers exactly the same), 409 a run_started for an id another project
    holds, 413 too large (the body limit, before reading), 422 schema, 503 queue down.
    A rejected batch writes nothing.
    """
    received_at = time.time()
    body = await request.body()  # at most RUNCAST_MAX_BODY_BYTES: api.limits.BodyLimit
    count = await run_in_threadpool(_accept, session, project.id, body, received_at)
    return Accepted(accepted=count)
