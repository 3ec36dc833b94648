"""``POST /api/v1/ingest``: accept a batch of events for the token's project.

The request is checked in full (size, JSON, schema, runs and project) before
anything is written; then, in one transaction, the batch's run_started events are
registered (so the next batch can be checked against them) and the batch is written
to the ingest inbox. Only after that commit does the API answer 202: an accepted batch
survives a restart of any component. The ingest task, which carries only the inbox
id, stores it (at once, in this process, when embedded). Storage is idempotent, so
the SDK may resend.
"""

from __future__ import annotations

import logging
import time
from typing import Any

from fastapi import APIRouter, Request
from fastapi.concurrency import run_in_threadpool
from kombu.exceptions import OperationalError as BrokerError
from pydantic import BaseModel
from runcast.wire.events import EventError, validate_batch
from sqlalchemy.orm import Session

from runcast_server.api.deps import ContextDep, SessionDep, WriterDep
from runcast_server.api.documented import json_body, ref
from runcast_server.api.ingest_doc import IngestBatch
from runcast_server.context import AppContext
from runcast_server.core.disk import check_room
from runcast_server.core.errors import ApiError, error_responses
from runcast_server.inbox import accept as inbox
from runcast_server.inbox.rows import parse_body
from runcast_server.ingest.checks import check_batch, register_runs
from runcast_server.ingest.results import IngestRejected
from runcast_server.observability.metrics import Metrics
from runcast_server.tasks import enqueue_ingest

router = APIRouter(tags=["ingest"])
log = logging.getLogger(__name__)


class Accepted(BaseModel):
    accepted: int


def _parse(body: bytes) -> Any:
    try:
        return parse_body(body)
    except (ValueError, UnicodeDecodeError) as exc:
        raise ApiError(400, f"body is not valid JSON: {exc}", field="body") from exc
    except RecursionError:
        raise ApiError(400, "body is nested too deeply to be a batch", field="body") from None


def accept_batch(ctx: AppContext, session: Session, project_id: int, body: bytes, received_at: float,
                 metrics: Metrics) -> int:
    """Parse and check the batch, register new runs, commit it to the inbox, enqueue; returns the event count.

    Refused first, with ``DiskFull`` (503), while the database's disk is below ``RUNCAST_MIN_FREE_BYTES``."""
    check_room(ctx.settings)
    try:
        events = validate_batch(_parse(body))
    except EventError as exc:
        raise ApiError(422, exc.message, field=exc.field, index=exc.index) from exc
    try:
        check_batch(session, project_id, events)
    except IngestRejected as exc:
        raise ApiError(exc.status, exc.message, field=exc.field, index=exc.index) from exc
    settings = ctx.settings
    register_runs(session, project_id, events, received_at=received_at)
    inbox_id = inbox.add(session, project_id, body, len(events), received_at,
                         next_sweep_at=received_at + settings.inbox_redeliver_after_s)
    session.commit()  # durable from here on; visible to the task and to the next batch's checks
    points = metrics.accepted(events)
    runs = sorted({e["run"] for e in events})
    log.info("ingest: accepted inbox %d: %d events, %d points", inbox_id, len(events), points,
             extra={"run_id": runs[0] if len(runs) == 1 else None, "run_ids": runs, "inbox_id": inbox_id})
    try:
        enqueue_ingest(ctx, inbox_id, events)
    except BrokerError as exc:
        log.warning("ingest: broker unreachable (%s); inbox %d waits for the sweeper", exc, inbox_id)
    except Exception:  # embedded: the task ran here and failed; the timer sweeps the row again
        log.exception("ingest: inbox %d could not be stored now; the sweeper will retry", inbox_id)
    return len(events)


@router.post("/ingest", status_code=202, response_model=Accepted,
             responses=error_responses(400, 401, 403, 404, 409, 422), openapi_extra=json_body(ref(IngestBatch)))
async def ingest(request: Request, project: WriterDep, session: SessionDep, ctx: ContextDep) -> Accepted:
    """Accept a batch ``{"v": 1, "events": [...]}`` for the token's project.

    202: the batch is committed to the ingest inbox and will be stored. Errors are
    ``{"error": {"message", "field", "index"?}}``: 400 not JSON, 401 token, 403 a
    run_started naming another project, 404 unknown run or segment (another project's
    run answers exactly the same), 409 a run_started for an id another project holds,
    413 too large (the body limit, before reading), 422 schema, 503 database unavailable or
    the embedded database's disk below RUNCAST_MIN_FREE_BYTES (with Retry-After). A rejected
    batch writes nothing.
    """
    received_at = time.time()
    body = await request.body()  # at most RUNCAST_MAX_BODY_BYTES: api.limits.BodyLimit
    count = await run_in_threadpool(accept_batch, ctx, session, project.id, body, received_at,
                                    request.app.state.metrics)
    return Accepted(accepted=count)
