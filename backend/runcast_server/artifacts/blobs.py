"""Images uploaded by trainers: checked, stored once per project, recorded as ``Blob`` rows.

``store_blob`` runs every check before it writes anything (the SHA-256 of the body, the image
itself: ``image_check``), then writes the bytes (``blob_store``) and only then inserts the row,
so a row always names bytes that are in place; a refused request leaves nothing behind. Two
uploads of the same bytes at once both write the same file and one row wins. ``blob_held`` is
what ``HEAD`` answers: the row, and the bytes still in the storage.
"""

from __future__ import annotations

import hashlib
import time

from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session

from runcast_server.artifacts.blob_store import BlobStore, blob_key
from runcast_server.artifacts.image_check import ImageRejected, check_image
from runcast_server.core.models import Project
from runcast_server.outputs.models import Blob


def blob_held(session: Session, store: BlobStore, project: Project, sha256: str) -> bool:
    """Whether the project holds these bytes (its row, and the file or object behind it)."""
    row = session.get(Blob, (project.id, sha256))
    return row is not None and store.exists(blob_key(project.name, sha256))


def store_blob(session: Session, store: BlobStore, project: Project, sha256: str, data: bytes, declared: str,
               max_pixels: int) -> tuple[Blob, bool]:
    """(the row, whether it is new) for ``data`` uploaded as ``sha256``; ImageRejected for bytes the
    server does not store. The session is flushed, not committed."""
    if not data:
        raise ImageRejected(422, "the body is empty", "body")
    if hashlib.sha256(data).hexdigest() != sha256:
        raise ImageRejected(422, "the SHA-256 of the body is not the one in the path", "sha256")
    info = check_image(data, declared, max_pixels)
    key = blob_key(project.name, sha256)
    row = session.get(Blob, (project.id, sha256))
    if row is not None:
        if not store.exists(key):  # the bytes went missing from the storage: put them back
            store.put(key, data, row.content_type)
        return row, False
    store.put(key, data, info.content_type)
    row = Blob(project_id=project.id, sha256=sha256, size=len(data), content_type=info.content_type,
               width=info.width, height=info.height, created_at=time.time())
    try:
        with session.begin_nested():
            session.add(row)
    except IntegrityError:  # the same bytes uploaded at the same time: the other request's row stands
        existing = session.get(Blob, (project.id, sha256))
        assert existing is not None
        return existing, False
    return row, True
