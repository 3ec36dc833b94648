"""Where images' bytes live: the checkpoint storage (a local root or S3), content-addressed.

A project's image is ``<project>/blobs/<sha256[:2]>/<sha256>``; a thumbnail of it ``w`` pixels
wide is ``<project>/blobs/thumbs/<sha256>-<w>.<ext>`` (``thumbnails``). Keys are made here from
a checked project name and a SHA-256 only, never from a client's path. A local write goes to a
temporary file in the target's directory, is fsync'd and renamed into place, so a reader (or a
crash) never sees part of a file; an S3 ``PutObject`` is atomic by itself.
"""

from __future__ import annotations

import contextlib
import os
import uuid
from typing import Any, Protocol

from runcast_server.artifacts.s3 import S3Storage


def blob_key(project: str, sha256: str) -> str:
    return f"{project}/blobs/{sha256[:2]}/{sha256}"


def thumb_key(project: str, sha256: str, width: int, ext: str) -> str:
    return f"{project}/blobs/thumbs/{sha256}-{width}.{ext}"


class BlobStore(Protocol):
    def put(self, key: str, data: bytes, content_type: str) -> None: ...

    def get(self, key: str) -> bytes | None: ...

    def exists(self, key: str) -> bool: ...


class LocalBlobStore:
    """Blobs under a local storage root."""

    def __init__(self, root: str | os.PathLike[str]) -> None:
        self.root = os.path.abspath(os.fspath(root))

    def _path(self, key: str) -> str:
        return os.path.join(self.root, *key.split("/"))

    def put(self, key: str, data: bytes, content_type: str) -> None:
        path = self._path(key)
        folder = os.path.dirname(path)
        os.makedirs(folder, exist_ok=True)
        project = os.path.join(os.path.realpath(self.root), key.split("/", 1)[0])
        if os.path.commonpath([project, os.path.realpath(folder)]) != project:
            raise OSError(f"{folder} leaves the project's directory through a symbolic link")
        tmp = os.path.join(folder, f".{os.path.basename(path)}.{uuid.uuid4().hex}.tmp")
        try:
            fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_CLOEXEC", 0), 0o640)
            try:
                view = memoryview(data)
                while view:
                    view = view[os.write(fd, view):]
                os.fsync(fd)
            finally:
                os.close(fd)
            os.replace(tmp, path)
        finally:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(tmp)
        _fsync_dir(folder)

    def get(self, key: str) -> bytes | None:
        try:
            fd = os.open(self._path(key), os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_CLOEXEC", 0))
        except (FileNotFoundError, NotADirectoryError):
            return None
        with os.fdopen(fd, "rb") as handle:
            return handle.read()

    def exists(self, key: str) -> bool:
        return os.path.isfile(self._path(key))


class S3BlobStore:
    """Blobs under the prefix of an ``S3Storage``."""

    def __init__(self, storage: S3Storage) -> None:
        self.client: Any = storage.client
        self.bucket = storage.bucket
        self.prefix = storage.prefix

    def _key(self, key: str) -> str:
        return f"{self.prefix}/{key}" if self.prefix else key

    def put(self, key: str, data: bytes, content_type: str) -> None:
        self.client.put_object(Bucket=self.bucket, Key=self._key(key), Body=data, ContentType=content_type)

    def get(self, key: str) -> bytes | None:
        from botocore.exceptions import ClientError

        try:
            body = self.client.get_object(Bucket=self.bucket, Key=self._key(key))["Body"]
        except ClientError as exc:
            if _missing(exc):
                return None
            raise
        try:
            return bytes(body.read())
        finally:
            body.close()

    def exists(self, key: str) -> bool:
        from botocore.exceptions import ClientError

        try:
            self.client.head_object(Bucket=self.bucket, Key=self._key(key))
        except ClientError as exc:
            if _missing(exc):
                return False
            raise
        return True


def blob_store_for(storage: object, settings: Any) -> BlobStore:
    """The blob side of the configured storage backend."""
    if isinstance(storage, S3Storage):
        return S3BlobStore(storage)
    return LocalBlobStore(settings.checkpoint_root)


def _missing(exc: Any) -> bool:
    return str(exc.response.get("Error", {}).get("Code", "")) in ("404", "NoSuchKey", "NotFound")


def _fsync_dir(folder: str) -> None:
    with contextlib.suppress(OSError):
        fd = os.open(folder, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)
