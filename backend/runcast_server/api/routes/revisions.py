"""Code revisions of a run and their diffs (as text)."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Path
from fastapi.responses import PlainTextResponse

from runcast_server.api.deps import SessionDep
from runcast_server.api.one_hop import Reading, RunReadDep
from runcast_server.api.read_deps import (
    RUN_ERRORS,
    ReadableRunDep,
    ViewDep,
)
from runcast_server.artifacts.http import content_disposition
from runcast_server.artifacts.revisions import (
    changes,
    load_revisions,
    published_diff,
    revision_json,
)
from runcast_server.artifacts.schemas import RevisionList
from runcast_server.core.errors import NotFound
from runcast_server.reads.published import published_remote

router = APIRouter(tags=["artifacts"])

RevisionId = Annotated[int, Path(ge=1, le=2**63 - 1, description="The revision id (from the list).")]


@router.get("/runs/{run_id}/revisions", response_model=RevisionList, responses=RUN_ERRORS)
async def list_revisions(read: RunReadDep) -> dict[str, Any]:
    """Each code state the run trained with, the segments that used it, and the code changes between segments."""
    def revision_list(rd: Reading) -> dict[str, Any]:
        policy, template = rd.view(), rd.context.settings.code_link_template
        if not policy.code_shown:
            raise NotFound("revisions", field="run")
        revisions = load_revisions(rd.session, rd.run.id, policy.horizon)
        return {
            "revisions": [{**revision_json(r, rd.run.id, template), "remote": published_remote(r.remote, rd.full),
                           **({} if policy.code_diff else {"diff_url": None})}
                          for r in revisions],
            "changes": changes(revisions),
        }

    return await read(revision_list)


@router.get(
    "/runs/{run_id}/revisions/{rid}/diff",
    response_class=PlainTextResponse,
    responses={200: {"content": {"text/plain": {}}}, **RUN_ERRORS},
)
def get_revision_diff(found: ReadableRunDep, session: SessionDep, rid: RevisionId, policy: ViewDep) -> PlainTextResponse:
    """The uncommitted diff of a dirty revision, as text/plain (credentials scrubbed)."""
    run, _ = found
    if not policy.code_diff:
        raise NotFound("revision", field="revision")
    revision = next((r for r in load_revisions(session, run.id, policy.horizon) if r.id == rid), None)
    if revision is None:
        raise NotFound("revision", field="revision")
    text, counts = published_diff(revision)
    headers = {
        "content-disposition": content_disposition(f"{run.id}-{(revision.sha or 'nosha')[:12]}.diff", "inline"),
        "x-content-type-options": "nosniff",
        "content-security-policy": "default-src 'none'; sandbox",
        "x-runcast-diff-truncated": "true" if revision.diff_truncated else "false",
        "x-runcast-scrubbed": str(sum(counts.values())),
    }
    return PlainTextResponse(text, headers=headers)
