"""Checkpoint uploads: what the storage offers, begin (or resume), chunks, complete (docs/artifacts.md).

Every route but ``/storage`` is a write of the token's project: the run must be one of
its runs (any other run, of another project or none, answers the same 404) and nothing
is written before every check passed.
"""

from __future__ import annotations

import time
from functools import partial
from typing import Annotated, Any

from fastapi import APIRouter, Body, Header, Path, Query, Request
from fastapi.concurrency import run_in_threadpool
from runcast.wire.events import ID_RE, dumps_batch
from sqlalchemy.orm import Session

from runcast_server.api.deps import IngestDep, SessionDep
from runcast_server.api.documented import json_body, ref
from runcast_server.api.read_deps import SettingsDep, StorageDep
from runcast_server.api.upload_doc import UploadBegin
from runcast_server.artifacts import uploads
from runcast_server.artifacts.models import Upload
from runcast_server.artifacts.schemas import (
    ChunkReceived,
    StorageCapabilities,
    UploadDone,
    UploadState,
)
from runcast_server.artifacts.upload_store import upload_store_for
from runcast_server.core.errors import ApiError, NotFound, error_responses
from runcast_server.core.models import Project
from runcast_server.core.settings import Settings
from runcast_server.inbox.accept import accept_batch
from runcast_server.record.models import Run
from runcast_server.tasks import enqueue_ingest

router = APIRouter(tags=["artifacts"])

RunId = Annotated[str, Path(description="The run id.", max_length=64)]
UploadId = Annotated[str, Path(description="The upload id (from begin).", max_length=32)]
_ERRORS = error_responses(401, 404, 409, 413, 422)


def _limits(settings: Settings) -> uploads.Limits:
    return uploads.Limits(settings.upload_chunk_bytes, settings.upload_max_bytes, settings.upload_max_files)


def _own_run(session: Session, project: Project, run_id: str) -> Run:
    run = session.get(Run, run_id) if ID_RE.match(run_id) else None
    if run is None or run.project_id != project.id:
        raise NotFound("run", field="run")
    return run


def _rejected(exc: uploads.UploadRejected) -> ApiError:
    return ApiError(exc.status, exc.message, field=exc.field)


def _record(session: Session, row: Upload, project_id: int, request: Request) -> None:
    """Mark the upload done and record its checkpoint event through the ingest inbox (commits)."""
    row.state = "done"
    row.completed_at = time.time()
    ctx = request.app.state.context
    accept_batch(ctx.settings, session, project_id, dumps_batch([row.event]), time.time(), request.app.state.metrics,
                 partial(enqueue_ingest, ctx))


@router.get("/storage", response_model=StorageCapabilities)
def get_storage_capabilities(settings: SettingsDep) -> dict[str, Any]:
    """What a trainer needs to publish checkpoints: uploads accepted, chunk size and limits, the backend."""
    return {
        "uploads": True,
        "backend": "s3" if settings.storage_url else "local",
        "chunk_bytes": settings.upload_chunk_bytes,
        "max_bytes": settings.upload_max_bytes,
        "max_files": settings.upload_max_files,
    }


@router.post("/runs/{run_id}/uploads", response_model=UploadState, response_model_exclude_unset=True, responses=_ERRORS,
             openapi_extra=json_body(ref(UploadBegin)))
def begin_upload(
    run_id: RunId, project: IngestDep, session: SessionDep, settings: SettingsDep, storage: StorageDep,
    request: Request,
    body: Annotated[Any, Body(description="An UploadBegin, read by uploads.begin.")] = None,
) -> dict[str, Any]:
    """Begin (or resume) publishing a checkpoint; ``state: done`` when the server already holds these bytes."""
    run = _own_run(session, project, run_id)  # another project's run: 404 before the body is looked at
    if not isinstance(body, dict):
        raise ApiError(422, "the body must be a JSON object describing the checkpoint", field="body")
    store = upload_store_for(storage, settings)
    try:
        row = uploads.begin(session, run=run, project=project.name, body=body, storage=storage, store=store,
                            limits=_limits(settings))
    except uploads.UploadRejected as exc:
        raise _rejected(exc) from None
    if row.mode == "in_place" and row.state != "done":
        _record(session, row, project.id, request)
    answer = uploads.state(store, row, _limits(settings))
    session.commit()
    return {**answer, "path": row.path if row.mode == "upload" else None}


@router.put("/runs/{run_id}/uploads/{upload_id}/files/{index}", response_model=ChunkReceived, responses=_ERRORS)
async def upload_chunk(
    run_id: RunId, upload_id: UploadId, project: IngestDep, session: SessionDep, settings: SettingsDep,
    storage: StorageDep, request: Request,
    index: Annotated[int, Path(ge=0, le=10**9, description="The file's index in the manifest.")],
    offset: Annotated[int | None, Query(ge=0, le=2**63 - 1, description="Where this chunk starts in the file.")] = None,
    chunk_sha256: Annotated[str | None, Header(alias="X-Runcast-Chunk-Sha256")] = None,
) -> dict[str, Any]:
    """Store one chunk (local storage): it must start where the file's stored bytes end and match its sha256."""
    data = await request.body()  # at most RUNCAST_UPLOAD_CHUNK_BYTES: api.limits.BodyLimit

    def write() -> int:
        run = _own_run(session, project, run_id)
        row = uploads.find(session, run, upload_id)
        if offset is None:
            raise uploads.UploadRejected(422, "offset (where the chunk starts in the file) is required", "offset")
        store = upload_store_for(storage, settings)
        return uploads.receive(store, row, index, offset, data, chunk_sha256, _limits(settings))

    try:
        received = await run_in_threadpool(write)
    except uploads.UploadRejected as exc:
        raise _rejected(exc) from None
    return {"index": index, "received": received}


@router.post("/runs/{run_id}/uploads/{upload_id}/complete", response_model=UploadDone, responses=_ERRORS)
def complete_upload(
    run_id: RunId, upload_id: UploadId, project: IngestDep, session: SessionDep, settings: SettingsDep,
    storage: StorageDep, request: Request,
) -> dict[str, Any]:
    """Verify every file's sha256, move the checkpoint into place and record its event."""
    run = _own_run(session, project, run_id)
    store = upload_store_for(storage, settings)
    try:
        row = uploads.find(session, run, upload_id)
        if row.state == "failed":
            raise uploads.UploadRejected(409, "the upload failed verification; begin it again", "upload")
        if row.state == "open":
            try:
                uploads.verify(store, row)
            except uploads.UploadRejected as exc:
                if exc.status == 422:
                    row.state = "failed"
                    session.commit()
                raise
            row.state = "placing"
            session.commit()  # verified: from here on a retry only places and records
        if row.state == "placing":
            try:
                uploads.place(store, row, project.name)
            except uploads.UploadRejected:
                row.state = "failed"
                session.commit()
                raise
            _record(session, row, project.id, request)
    except uploads.UploadRejected as exc:
        raise _rejected(exc) from None
    return {"id": row.id, "state": "done", "path": row.path, "size": row.size}
