"""Serving a run's images: ``GET /api/v1/runs/{id}/media/{mid}/image?w=`` (docs/samples.md).

An image is shown to whoever may read its run (a private run's images are as unknown to
anyone else as the run) and, outside the team, only while the publication policy shows media
and once the broadcast delay has passed for the batch that stored it
(``outputs.access.output_visible``). The bytes are the blob's, with the type the server found in them, or a thumbnail
(``thumbnails``). A blob never changes, so the answer is cacheable for a year; by shared caches
only when anyone may see it (``cache_control``).
"""

from __future__ import annotations

from sqlalchemy.orm import Session

from runcast_server.artifacts.blob_store import BlobStore, blob_key
from runcast_server.artifacts.thumbnails import THUMB_TYPE, thumbnail
from runcast_server.core.errors import NotFound
from runcast_server.outputs.access import output_visible
from runcast_server.outputs.models import Blob, Media
from runcast_server.policy.apply import View
from runcast_server.record.models import Run

YEAR_S = 365 * 24 * 3600


def find_image(session: Session, run: Run, media_id: int, view: View) -> tuple[Media, Blob]:
    """The image media row of ``run`` and its blob; NotFound (as an unknown id) for anything the viewer may not see."""
    row = session.get(Media, media_id)
    if row is None or row.run_id != run.id or row.kind != "image" or row.blob is None or not output_visible(view, row):
        raise NotFound("image", field="media_id")
    blob = session.get(Blob, (run.project_id, row.blob))
    if blob is None:
        raise NotFound("image", field="media_id")
    return row, blob


def _thumbnailed(blob: Blob, width: int | None) -> bool:
    """Whether ``?w=width`` asks for a thumbnail (narrower than the image: never an enlargement)."""
    return width is not None and blob.width is not None and width < blob.width


def image_etag(blob: Blob, width: int | None) -> str:
    """A strong ETag: the blob's SHA-256 fixes the bytes (and the width, a thumbnail's)."""
    return f'"{blob.sha256}-w{width}"' if _thumbnailed(blob, width) else f'"{blob.sha256}"'


def image_bytes(store: BlobStore, project: str, blob: Blob, width: int | None) -> tuple[bytes, str]:
    """(bytes, content type) of the image, or of its thumbnail ``width`` pixels wide."""
    original = store.get(blob_key(project, blob.sha256))
    if original is None:
        raise NotFound("image", field="media_id")
    if not _thumbnailed(blob, width):
        return original, blob.content_type
    assert width is not None
    return thumbnail(store, project, blob.sha256, original, width), THUMB_TYPE


def cache_control(shared: bool) -> str:
    """Immutable for a year; ``public`` only when anyone may see the image (else the browser's cache only)."""
    return f"{'public' if shared else 'private'}, max-age={YEAR_S}, immutable"
