"""``POST /api/v1/ingest``: accept a batch of events for the token's project.

The request is checked in full (size, JSON, schema, runs and project) before
anything is written; then, in one transaction, the batch's run_started events are
registered (so the next batch can be checked against them) and the batch is written
to the ingest inbox. Only after that commit does the API answer 202: an accepted batch
survives a restart of any component (``inbox.accept.accept_batch``, the write door,
which checkpoint uploads use too). The ingest task, which carries only the inbox id,
stores it (at once, in this process, when embedded). Storage is idempotent, so the SDK
may resend.
"""

from __future__ import annotations

import logging
import time
from functools import partial

from fastapi import APIRouter, Request
from fastapi.concurrency import run_in_threadpool
from pydantic import BaseModel, Field

from runcast_server.api.deps import ContextDep, IngestDep, SessionDep
from runcast_server.api.documented import json_body, ref
from runcast_server.api.ingest_doc import IngestBatch
from runcast_server.commands import record
from runcast_server.commands.schemas import DeliveredCommand
from runcast_server.core.errors import error_responses
from runcast_server.inbox.accept import accept_batch
from runcast_server.tasks import enqueue_ingest

log = logging.getLogger(__name__)

router = APIRouter(tags=["ingest"])


class Accepted(BaseModel):
    accepted: int
    commands: list[DeliveredCommand] = Field(
        default_factory=list,
        description="Commands from the team waiting for the batch's runs (docs/commands.md): the trainer "
        "acts on each id once and acknowledges it with a command_ack event. Absent when none waits.")


# No "commands" key when none waits: the answer stays {"accepted": N} for every client that never sends any.
@router.post("/ingest", status_code=202, response_model=Accepted, response_model_exclude_defaults=True,
             responses=error_responses(400, 401, 403, 404, 409, 422), openapi_extra=json_body(ref(IngestBatch)))
async def ingest(request: Request, project: IngestDep, session: SessionDep, ctx: ContextDep) -> Accepted:
    """Accept a batch ``{"v": 1, "events": [...]}`` for the token's project.

    202: the batch is committed to the ingest inbox and will be stored; the answer carries the
    commands waiting for its runs (docs/commands.md). Errors are
    ``{"error": {"message", "field", "index"?}}``: 400 not JSON, 401 token, 403 a
    run_started naming another project, 404 unknown run or segment (another project's
    run answers exactly the same), 409 a run_started for an id another project holds,
    413 too large (the body limit, before reading), 422 schema, 503 database unavailable or
    the embedded database's disk below RUNCAST_MIN_FREE_BYTES (with Retry-After). A rejected
    batch writes nothing.
    """
    received_at = time.time()
    body = await request.body()  # at most RUNCAST_MAX_BODY_BYTES: api.limits.BodyLimit
    done = await run_in_threadpool(accept_batch, ctx.settings, session, project.id, body, received_at,
                                   request.app.state.metrics, partial(enqueue_ingest, ctx))
    for run_id, command in done.acked:  # open pages of the run read its commands again (live/fanout.py)
        try:
            ctx.hub.publish(run_id, record.notice(run_id, command, "resolved"))
        except Exception:  # the batch is stored: an open page misses only the notice (it reads again later)
            log.warning("ingest: the commands notice for run %s could not be published", run_id, exc_info=True)
    return Accepted(accepted=done.events, commands=[DeliveredCommand(**c) for c in done.commands])
