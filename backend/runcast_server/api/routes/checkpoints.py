"""Checkpoints of a run: the list, downloads (Range, HEAD, sha256 ETag) and reproducibility cards."""

from __future__ import annotations

import json
from typing import Annotated, Any
from urllib.parse import quote

from fastapi import APIRouter, Path, Query
from fastapi.responses import Response, StreamingResponse

from runcast_server.api.deps import SessionDep, ViewerDep
from runcast_server.api.one_hop import Reading, RunReadDep
from runcast_server.api.read_deps import (
    RUN_ERRORS,
    FullViewDep,
    ReadableRunDep,
    SettingsDep,
    StorageDep,
    ViewDep,
)
from runcast_server.artifacts import archive, cards
from runcast_server.artifacts.archive import Member
from runcast_server.artifacts.checkpoints import (
    CheckpointRecord,
    CheckpointView,
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
from runcast_server.artifacts.schemas import (
    CheckpointCard,
    CheckpointFiles,
    CheckpointList,
)
from runcast_server.artifacts.storage import Storage, StoredObject
from runcast_server.artifacts.uploads import manifest_for
from runcast_server.core.errors import ApiError, NotFound, error_responses
from runcast_server.outputs.evals import checkpoint_evals
from runcast_server.policy.apply import View

router = APIRouter(tags=["artifacts"])

CheckpointId = Annotated[int, Path(ge=1, le=2**63 - 1, description="The checkpoint id (from the list).")]


@router.get("/runs/{run_id}/checkpoints", response_model=CheckpointList, responses=RUN_ERRORS)
async def list_checkpoints(read: RunReadDep) -> dict[str, Any]:
    """Every checkpoint the run recorded (pruned ones too), by segment and step, with its status and
    its evaluation scores. Under a publication policy that withholds checkpoints the list is empty
    and ``withheld`` true."""
    return await read(_checkpoint_list)


def _checkpoint_list(r: Reading) -> dict[str, Any]:
    run, policy, storage = r.run, r.view(), r.context.storage
    if not policy.event_shown("checkpoint"):
        return {"checkpoints": [], "withheld": True}
    private_ok = may_see_private(run, r.viewer)
    records = load_checkpoints(r.session, run.id, policy.horizon)
    scores = checkpoint_evals(r.session, run.id, policy, (c.step for c in records))
    return {
        "checkpoints": [
            {**_published(policy, as_json(view(record, storage, project=r.project, private_ok=private_ok), run.id)),
             "evals": scores.get(record.step, [])}
            for record in records
        ],
        "withheld": False,
    }


def _published(policy: View, item: dict[str, Any]) -> dict[str, Any]:
    """A checkpoint entry under the publication policy: metadata only unless downloadable."""
    if isinstance(item.get("metrics"), dict):
        item = {**item, "metrics": policy.by_key(item["metrics"])}
    if not (policy.team or policy.policy["checkpoints"] == "downloadable"):
        item = {**item, "download_url": None, "files_url": None}
    return item


def _find(
    session: SessionDep, run: Any, viewer: Any, cid: int, policy: View
) -> tuple[CheckpointRecord, list[CheckpointRecord]]:
    """The checkpoint and all of the run's; a private one, or any under a policy that withholds
    checkpoints, is as unknown to other viewers (404)."""
    policy.require("checkpoint")
    records = load_checkpoints(session, run.id, policy.horizon)
    for record in records:
        if record.id == cid and (record.public or may_see_private(run, viewer)):
            return record, records
    raise NotFound("checkpoint", field="checkpoint")


def _cache_control(run: Any, record: Any) -> str:
    """Shared caches may keep only what anyone may read: a private run's or checkpoint's bytes are private."""
    return "no-cache" if record.public and run.visibility != "private" else "private, no-cache"


def _downloadable(
    session: SessionDep, found: Any, viewer: Any, storage: Storage, cid: int, policy: View
) -> tuple[CheckpointRecord, CheckpointView, Storage]:
    """The checkpoint a viewer may download, as stored now, and its storage; 404 if unknown or withheld, 410 if pruned."""
    run, project = found
    record, _ = _find(session, run, viewer, cid, policy)
    policy.require_download()
    v = view(record, storage, project=project, private_ok=may_see_private(run, viewer))
    if v.status == "pruned":
        raise ApiError(410, "the checkpoint was pruned by the trainer; its metadata stays in the list", field="checkpoint")
    return record, v, storage


_FILE_RESPONSES: dict[int | str, dict[str, Any]] = {
    200: {"content": {"application/octet-stream": {}}, "description": "The file."},
    206: {"content": {"application/octet-stream": {}}, "description": "A byte range (Range request)."},
    **RUN_ERRORS,
    **error_responses(410, 416),
}
_DOWNLOAD_RESPONSES: dict[int | str, dict[str, Any]] = {
    **_FILE_RESPONSES,
    200: {"content": {"application/octet-stream": {}, "application/x-tar": {}},
          "description": "The file; a directory checkpoint as one tar archive (no Range)."},
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
    found: ReadableRunDep, session: SessionDep, viewer: ViewerDep, settings: SettingsDep, storage: StorageDep,
    cid: CheckpointId, policy: ViewDep,
) -> Response:
    """The checkpoint file: streamed, one Range per request (206), If-Range, ETag = sha256.

    A directory checkpoint comes as one tar archive, streamed (no Range; its files one by one: ``files``).
    """
    run, project = found
    record, v, storage = _downloadable(session, found, viewer, storage, cid, policy)
    if v.status == "missing" or v.stored is None:
        raise ApiError(404, f"the checkpoint file is not available: {v.reason}", field="checkpoint")
    if v.stored.is_dir:
        files = archive.members(storage, v.stored, manifest_for(session, run.id, record.path))
        name = filename_for(record, v.stored)
        headers = {
            "content-disposition": content_disposition(f"{name}.tar"),
            "cache-control": _cache_control(run, record),
            "x-content-type-options": "nosniff",
        }
        stream = archive.tar_stream(storage, v.stored, files, recorded_path=record.path, project=project,
                                    chunk=settings.download_chunk_bytes, mtime=record.ts)
        return StreamingResponse(stream, media_type="application/x-tar", headers=headers)
    return CheckpointFileResponse(
        storage,
        v.stored,
        sha256=record.sha256,
        filename=filename_for(record, v.stored),
        chunk_size=settings.download_chunk_bytes,
        cache_control=_cache_control(run, record),
        accel_prefix=settings.download_accel_prefix,
        presign_s=settings.download_presign_s,
    )


def _directory(
    session: SessionDep, found: Any, viewer: Any, storage: Storage, cid: int, policy: View
) -> tuple[CheckpointRecord, StoredObject, Storage, list[Member]]:
    """(record, stored directory, storage, files) of an available directory checkpoint; 404/410 otherwise."""
    run, _ = found
    record, v, storage = _downloadable(session, found, viewer, storage, cid, policy)
    if v.stored is None or not v.stored.is_dir:
        raise NotFound("directory checkpoint", field="checkpoint")
    return record, v.stored, storage, archive.members(storage, v.stored, manifest_for(session, run.id, record.path))


@router.get("/runs/{run_id}/checkpoints/{cid}/files", response_model=CheckpointFiles,
            responses={**RUN_ERRORS, **error_responses(410)})
def list_checkpoint_files(
    found: ReadableRunDep, session: SessionDep, viewer: ViewerDep, storage: StorageDep, cid: CheckpointId,
    policy: ViewDep,
) -> dict[str, Any]:
    """The files of a directory checkpoint: relative path, size, sha256 (null when not verified), download URL."""
    record, _, _, files = _directory(session, found, viewer, storage, cid, policy)
    base = f"/api/v1/runs/{found[0].id}/checkpoints/{record.id}/files/"
    return {"files": [{"path": f.path, "size": f.size, "sha256": f.sha256,
                       "download_url": base + quote(f.path, safe="/")} for f in files]}


@router.head("/runs/{run_id}/checkpoints/{cid}/files/{file_path:path}", response_class=Response,
             responses=_FILE_RESPONSES, operation_id="head_checkpoint_file")
@router.get("/runs/{run_id}/checkpoints/{cid}/files/{file_path:path}", response_class=Response,
            responses=_FILE_RESPONSES, operation_id="get_checkpoint_file")
def download_checkpoint_file(
    found: ReadableRunDep, session: SessionDep, viewer: ViewerDep, settings: SettingsDep, storage: StorageDep,
    cid: CheckpointId, file_path: str, policy: ViewDep,
) -> Response:
    """One file of a directory checkpoint (only a path the listing names), as the download route serves files."""
    record, _, storage, files = _directory(session, found, viewer, storage, cid, policy)
    member = next((f for f in files if f.path == file_path), None)
    if member is None:
        raise NotFound("file of this checkpoint", field="file_path")
    stored = storage.locate(f"{record.path.rstrip('/')}/{member.path}", within=found[1])
    return CheckpointFileResponse(
        storage, stored, sha256=member.sha256, filename=stored.name, chunk_size=settings.download_chunk_bytes,
        cache_control=_cache_control(found[0], record), accel_prefix=settings.download_accel_prefix,
        presign_s=settings.download_presign_s,
    )


@router.get("/runs/{run_id}/checkpoints/{cid}/card", responses={200: {"model": CheckpointCard}, **RUN_ERRORS})
def get_checkpoint_card(
    found: ReadableRunDep,
    session: SessionDep,
    viewer: ViewerDep,
    settings: SettingsDep,
    storage: StorageDep,
    full: FullViewDep,
    policy: ViewDep,
    cid: CheckpointId,
    download: Annotated[bool, Query(description="Send as an attachment (a .json file).")] = False,
) -> Response:
    """The reproducibility card: code revision, config, packages, seed, manifest, data position, parent."""
    run, project = found
    record, records = _find(session, run, viewer, cid, policy)
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
        revisions=load_revisions(session, run.id, policy.horizon),
        manifests=load_manifests(session, run.id, segments, policy.horizon),
        mix=load_mix(session, run.id, policy.horizon),
        link_template=settings.code_link_template,
        download_url=_published(policy, as_json(v, run.id))["download_url"],
        evals=checkpoint_evals(session, run.id, policy, [record.step]).get(record.step, []),
        full=full,
    )
    card = _card_published(policy, card)
    headers = {}
    if download:
        headers["content-disposition"] = content_disposition(f"{run.id}-step{record.step}-card.json")
    body = json.dumps(card, allow_nan=False, indent=2 if download else None, separators=None if download else (",", ":"))
    return Response(body, media_type="application/json", headers=headers)


def _card_published(policy: View, card: dict[str, Any]) -> dict[str, Any]:
    """A card's run data under the publication policy (what the run page would withhold)."""
    if policy.team:
        return card
    out = {**card, "config": policy.config(card.get("config") or {})}
    if not policy.code_shown:
        out["code"] = None
    elif isinstance(card.get("code"), dict) and not policy.code_diff:
        out["code"] = {**card["code"], "diff_url": None}
    if policy.policy["env"] == "hidden":
        out["packages"] = {}
    if not policy.event_shown("manifest"):
        out["manifest"] = None
    elif isinstance(card.get("manifest"), dict) and policy.policy["manifests"] != "previews":
        out["manifest"] = {**card["manifest"], "url": None}
    if not policy.event_shown("data_mix"):
        out["data_mix"] = None
        out["data_position"] = None
    if isinstance(card.get("checkpoint"), dict) and isinstance(card["checkpoint"].get("metrics"), dict):
        out["checkpoint"] = {**card["checkpoint"], "metrics": policy.by_key(card["checkpoint"]["metrics"])}
    return out
