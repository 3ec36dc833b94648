"""Checkpoints of a run: the list, downloads (Range, HEAD, sha256 ETag) and reproducibility cards."""

from __future__ import annotations

import json
from typing import Annotated, Any

from fastapi import APIRouter, Path, Query
from fastapi.responses import Response

from runcast_server.api.deps import SessionDep, ViewerDep
from runcast_server.api.read_deps import RUN_ERRORS, FullViewDep, ReadableRunDep, SettingsDep
from runcast_server.artifacts import cards
from runcast_server.artifacts.checkpoints import (
    as_json,
    filename_for,
    load_checkpoints,
    may_see_private,
    view,
)
from runcast_server.artifacts.http import CheckpointFileResponse, content_disposition
from runcast_server.artifacts.lineage import run_segments
from runcast_server.artifacts.manifests import load_manifests, load_mix
from runcast_server.artifacts.revisions import load_revisions
from runcast_server.artifacts.storage import storage_from_settings
from runcast_server.errors import ApiError, NotFound, error_responses

router = APIRouter(tags=["artifacts"])

CheckpointId = Annotated[int, Path(ge=1, le=2**63 - 1, description="The checkpoint id (from the list).")]


@router.get("/runs/{run_id}/checkpoints", responses=RUN_ERRORS)
def list_checkpoints(found: ReadableRunDep, session: SessionDep, viewer: ViewerDep, settings: SettingsDep) -> dict[str, Any]:
    """Every checkpoint the run recorded (pruned ones too), by segment and step, with its status."""
    run, project = found
    storage = storage_from_settings(settings)
    private_ok = may_see_private(run, viewer)
    return {
        "checkpoints": [
            as_json(view(record, storage, project=project, private_ok=private_ok), run.id)
            for record in load_checkpoints(session, run.id)
        ]
    }


def _find(session: SessionDep, run: Any, viewer: Any, cid: int):  # type: ignore[no-untyped-def]
    """The checkpoint and all of the run's; a private one is as unknown to other viewers (404)."""
    records = load_checkpoints(session, run.id)
    for record in records:
        if record.id == cid and (record.public or may_see_private(run, viewer)):
            return record, records
    raise NotFound("checkpoint", field="checkpoint")


_DOWNLOAD_RESPONSES: dict[int | str, dict[str, Any]] = {
    200: {"content": {"application/octet-stream": {}}},
    206: {"description": "A byte range (Range request)."},
    **RUN_ERRORS,
    **error_responses(409, 410, 416),
}


@router.head(
    "/runs/{run_id}/checkpoints/{cid}/download",
    response_class=Response,
    responses=_DOWNLOAD_RESPONSES,
    operation_id="head_checkpoint_download",
)
@router.get(
    "/runs/{run_id}/checkpoints/{cid}/download",
    response_class=Response,
    responses=_DOWNLOAD_RESPONSES,
    operation_id="get_checkpoint_download",
)
def download_checkpoint(
    found: ReadableRunDep, session: SessionDep, viewer: ViewerDep, settings: SettingsDep, cid: CheckpointId
) -> Response:
    """The checkpoint file: streamed, one Range per request (206), If-Range, ETag = sha256."""
    run, project = found
    record, _ = _find(session, run, viewer, cid)
    storage = storage_from_settings(settings)
    v = view(record, storage, project=project, private_ok=may_see_private(run, viewer))
    if v.status == "pruned":
        raise ApiError(410, "the checkpoint was pruned by the trainer; its metadata stays in the list", field="checkpoint")
    if v.status == "missing" or v.stored is None:
        raise ApiError(404, f"the checkpoint file is not available: {v.reason}", field="checkpoint")
    if v.stored.is_dir:
        raise ApiError(409, "the checkpoint is a directory; only single files can be downloaded", field="checkpoint")
    return CheckpointFileResponse(
        storage,
        v.stored,
        sha256=record.sha256,
        filename=filename_for(record, v.stored),
        chunk_size=settings.download_chunk_bytes,
        cache_control="private, no-cache" if not record.public else "no-cache",
    )


@router.get("/runs/{run_id}/checkpoints/{cid}/card", responses=RUN_ERRORS)
def checkpoint_card(
    found: ReadableRunDep,
    session: SessionDep,
    viewer: ViewerDep,
    settings: SettingsDep,
    full: FullViewDep,
    cid: CheckpointId,
    download: Annotated[bool, Query(description="Send as an attachment (a .json file).")] = False,
) -> Response:
    """The reproducibility card: code revision, config, packages, seed, manifest, data position, parent."""
    run, project = found
    record, records = _find(session, run, viewer, cid)
    storage = storage_from_settings(settings)
    private_ok = may_see_private(run, viewer)
    v = view(record, storage, project=project, private_ok=private_ok)
    segments = run_segments(session, run.id)
    card = cards.build_card(
        session,
        run=run,
        project=project,
        record=record,
        status=v.status,
        checkpoints=records if private_ok else [r for r in records if r.public],
        segments=segments,
        revisions=load_revisions(session, run.id),
        manifests=load_manifests(session, run.id, segments),
        mix=load_mix(session, run.id),
        link_template=settings.code_link_template,
        download_url=as_json(v, run.id)["download_url"],
        full=full,
    )
    headers = {}
    if download:
        headers["content-disposition"] = content_disposition(f"{run.id}-step{record.step}-card.json")
    body = json.dumps(card, allow_nan=False, indent=2 if download else None, separators=None if download else (",", ":"))
    return Response(body, media_type="application/json", headers=headers)
