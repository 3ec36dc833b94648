"""Images of runs: trainers upload them as blobs; viewers get them, or thumbnails (docs/samples.md).

``PUT``/``HEAD /runs/{run_id}/blobs/{sha256}`` are writes of the token's project: the run must be
one of its runs (another project's run, or none, answers the same 404). The body is read only
after the token, the run and the declared type passed, and at most ``RUNCAST_MAX_BLOB_BYTES`` of
it (``api.limits.BodyLimit``: 413 before a byte is read when the length is declared).
"""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Path, Query, Request
from fastapi.concurrency import run_in_threadpool
from fastapi.responses import JSONResponse, Response
from runcast.wire.events import ID_RE
from sqlalchemy.orm import Session

from runcast_server.api.deps import IngestDep, SessionDep
from runcast_server.api.read_deps import RUN_ERRORS, ReadableRunDep, SettingsDep, StorageDep, ViewDep
from runcast_server.artifacts.blob_store import blob_store_for
from runcast_server.artifacts.blobs import blob_held, store_blob
from runcast_server.artifacts.image_check import ImageRejected, declared_type
from runcast_server.artifacts.media_images import (
    cache_control,
    find_image,
    image_bytes,
    image_etag,
)
from runcast_server.artifacts.schemas import BlobStored
from runcast_server.core.errors import ApiError, ErrorBody, NotFound, error_responses
from runcast_server.core.models import Project
from runcast_server.outputs.access import output_visible
from runcast_server.policy.apply import public_view
from runcast_server.record.models import Run
from runcast_server.share.http import fresh

router = APIRouter(tags=["artifacts"])

Sha256 = Annotated[str, Path(description="The SHA-256 of the image's bytes (64 lowercase hex digits).",
                             pattern="^[0-9a-f]{64}$")]
_IMAGE_TYPES: dict[str, dict[str, Any]] = {"image/png": {}, "image/jpeg": {}}
_TYPE_ERROR = {"model": ErrorBody, "description": "The body is not a PNG or JPEG image (``field``: Content-Type)."}
_BLOB_ERRORS: dict[int | str, dict[str, Any]] = {**error_responses(401, 404, 413, 422), 415: _TYPE_ERROR}
_SECURE = {"X-Content-Type-Options": "nosniff", "Content-Security-Policy": "default-src 'none'; sandbox"}


def _own_run(session: Session, project: Project, run_id: str) -> Run:
    run = session.get(Run, run_id) if ID_RE.match(run_id) else None
    if run is None or run.project_id != project.id:
        raise NotFound("run", field="run")
    return run


@router.head("/runs/{run_id}/blobs/{sha256}", response_class=Response,
             responses={200: {"description": "The server holds these bytes."}, **error_responses(401, 404, 422)})
def head_blob(run_id: Annotated[str, Path(max_length=64)], sha256: Sha256, project: IngestDep, session: SessionDep,
              settings: SettingsDep, storage: StorageDep) -> Response:
    """Whether the run's project holds the image with this SHA-256: 200, or 404 (the SDK then sends it)."""
    _own_run(session, project, run_id)
    if not blob_held(session, blob_store_for(storage, settings), project, sha256):
        raise NotFound("blob", field="sha256")
    return Response(status_code=200)


@router.put(
    "/runs/{run_id}/blobs/{sha256}", response_model=BlobStored, status_code=201,
    responses={200: {"model": BlobStored, "description": "The project held these bytes already."}, **_BLOB_ERRORS},
    openapi_extra={"requestBody": {"required": True, "content": {t: {"schema": {"type": "string", "format": "binary"}}
                                                                 for t in _IMAGE_TYPES}}},
)
async def put_blob(run_id: Annotated[str, Path(max_length=64)], sha256: Sha256, project: IngestDep,
                   session: SessionDep, settings: SettingsDep, storage: StorageDep, request: Request) -> Any:
    """Store an image (the body: PNG or JPEG bytes, as ``Content-Type`` says) once per project: its SHA-256
    must be the path's, the bytes a whole image of the declared type with at most
    ``RUNCAST_MAX_IMAGE_PIXELS`` pixels. 201 when stored, 200 when the project held it already."""
    await run_in_threadpool(_own_run, session, project, run_id)
    try:
        declared = declared_type(request.headers.get("content-type"))
    except ImageRejected as exc:
        raise ApiError(exc.status, exc.message, field=exc.field) from None
    data = await request.body()  # at most RUNCAST_MAX_BLOB_BYTES: api.limits.BodyLimit

    def store() -> tuple[dict[str, Any], bool]:
        row, created = store_blob(session, blob_store_for(storage, settings), project, sha256, data, declared,
                                  settings.max_image_pixels)
        return {"sha256": row.sha256, "size": row.size, "content_type": row.content_type, "width": row.width,
                "height": row.height}, created

    try:
        answer, created = await run_in_threadpool(store)
    except ImageRejected as exc:
        raise ApiError(exc.status, exc.message, field=exc.field) from None
    return JSONResponse(answer, status_code=201 if created else 200)


@router.get(
    "/runs/{run_id}/media/{media_id}/image", response_class=Response,
    responses={200: {"content": {**_IMAGE_TYPES, "image/webp": {}}, "description": "The image or its thumbnail."},
               **RUN_ERRORS},
)
def get_media_image(
    request: Request, found: ReadableRunDep, session: SessionDep, settings: SettingsDep, storage: StorageDep,
    policy: ViewDep,
    media_id: Annotated[int, Path(ge=1, le=2**53 - 1, description="The media id (from the run's media list).")],
    w: Annotated[int | None, Query(ge=16, le=2048, description="A thumbnail this many pixels wide (never wider "
                                                             "than the image; the aspect ratio kept).")] = None,
) -> Response:
    """An image of the run, as uploaded (the type the server found in it) or as a thumbnail (WebP); cacheable
    for a year (``ETag``: the SHA-256), ``public`` only when anyone may see it."""
    run, project = found
    row, blob = find_image(session, run, media_id, policy)
    shared = run.visibility != "private" and (not policy.team or output_visible(public_view(session, run), row))
    headers = {"ETag": image_etag(blob, w), "Cache-Control": cache_control(shared), **_SECURE}
    if fresh(request, headers["ETag"]):
        return Response(status_code=304, headers=headers)
    body, content_type = image_bytes(blob_store_for(storage, settings), project, blob, w)
    return Response(body, media_type=content_type, headers=headers)
