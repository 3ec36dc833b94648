"""``/api/v1/admin/inbox``: the ingest inbox for operators (admin token only).

Quarantined batches (those the worker could not store, with their error and the
events that failed), counts per state, and a retry that sends a quarantined batch
through the worker again.
"""

from __future__ import annotations

import logging
import time
from typing import Annotated, Any, Literal

from fastapi import APIRouter, Path, Query

from runcast_server.api.deps import AdminDep, ContextDep, SessionDep
from runcast_server.core.errors import ApiError, NotFound, error_responses
from runcast_server.inbox import quarantine
from runcast_server.inbox.schemas import (
    InboxPage,
    InboxRetry,
    InboxRowDetail,
    InboxStats,
)

log = logging.getLogger(__name__)
router = APIRouter(prefix="/admin", tags=["admin"], dependencies=[AdminDep], responses=error_responses(401, 403, 422))

InboxId = Annotated[int, Path(ge=1, le=2**63 - 1, description="The inbox row's id.")]


@router.get("/inbox/stats", response_model=InboxStats)
def get_inbox_stats(session: SessionDep) -> dict[str, Any]:
    """Rows per state and the number of stored batches whose detectors failed."""
    return quarantine.counts(session)


@router.get("/inbox", response_model=InboxPage)
def list_inbox(
    session: SessionDep,
    state: Annotated[
        Literal["pending", "stored", "done", "quarantined", "all"], Query(description="Rows in this state.")
    ] = "quarantined",
    after: Annotated[int | None, Query(ge=0, le=2**63 - 1, description="next_cursor of the previous page.")] = None,
    limit: Annotated[int, Query(ge=1, le=500)] = 50,
) -> dict[str, Any]:
    """Inbox rows oldest first; by default the quarantined ones."""
    return quarantine.list_rows(session, state=None if state == "all" else state, after=after, limit=limit)


@router.get("/inbox/{inbox_id}", response_model=InboxRowDetail, responses=error_responses(404))
def get_inbox_row(session: SessionDep, inbox_id: InboxId) -> dict[str, Any]:
    """One row, with the content of each event that could not be stored."""
    found = quarantine.show(session, inbox_id)
    if found is None:
        raise NotFound("inbox row", field="inbox_id")
    return found


@router.post("/inbox/{inbox_id}/retry", status_code=202, response_model=InboxRetry, responses=error_responses(404, 409))
def retry_inbox(session: SessionDep, ctx: ContextDep, inbox_id: InboxId) -> dict[str, Any]:
    """Send a quarantined batch through the worker again (it is quarantined again if it fails again)."""
    from runcast_server.tasks import enqueue_ingest

    if not quarantine.retry(session, inbox_id, time.time()):
        if quarantine.show(session, inbox_id) is None:
            raise NotFound("inbox row", field="inbox_id")
        raise ApiError(409, "only a quarantined row with a batch can be retried (an unreadable broker message has none)",
                       field="inbox_id")
    session.commit()
    try:
        enqueue_ingest(ctx, inbox_id)
    except Exception:
        log.warning("admin: could not enqueue inbox %d now; the sweeper will", inbox_id, exc_info=True)
    return {"id": inbox_id, "state": "pending"}
