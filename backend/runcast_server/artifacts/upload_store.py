"""Where uploaded checkpoint bytes go before and after they are verified.

``LocalUploadStore``: chunks are written (``pwrite``) into one staging file
per manifest entry under ``<root>/.runcast-uploads/<upload id>/`` (a project name cannot
start with a dot, so no checkpoint event can name it); what a file holds on disk is what
the upload has received, which survives a server restart. ``place`` moves the verified
files into ``<root>/<path>`` with renames (same filesystem): a directory is assembled
under a hidden name next to its target and renamed into place, so a reader never sees
half a tree.

``S3UploadStore``: one multipart upload per file at its final key; the trainer sends the
parts itself to presigned URLs. What was received is what the store lists
(``ListParts``); ``complete`` assembles the object, and the server then reads it back
to check its sha256 (deleting it when it does not match).
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import shutil
from typing import Any, Final

from runcast_server.artifacts.s3 import S3Storage
from runcast_server.artifacts.storage import UnsafePath

STAGING: Final = ".runcast-uploads"
HASH_CHUNK: Final = 4 * 1024 * 1024
S3_MIN_PART: Final = 5 * 1024 * 1024  # S3's smallest part but the last
S3_MAX_PARTS: Final = 10_000
PRESIGN_SECONDS: Final = 3600


def file_target(path: str, kind: str, rel: str) -> str:
    """The key (relative to the root or prefix) of one manifest entry of a checkpoint stored at ``path``."""
    return path if kind == "file" else f"{path}/{rel}"


class LocalUploadStore:
    """Staging and placing uploads under a local storage root."""

    def __init__(self, root: str | os.PathLike[str]) -> None:
        self.root = os.path.abspath(os.fspath(root))

    def _staged(self, upload_id: str, index: int) -> str:
        return os.path.join(self.root, STAGING, upload_id, str(index))

    def received(self, upload_id: str, index: int) -> int:
        try:
            return os.stat(self._staged(upload_id, index)).st_size
        except FileNotFoundError:
            return 0

    def write(self, upload_id: str, index: int, offset: int, data: bytes) -> int:
        """Write ``data`` at ``offset`` of the staged file; returns the bytes now received.

        Not fsync'd per chunk (that cost 100 ms per 8 MiB here): a process restart keeps
        the page cache, and bytes lost to a machine crash fail the final sha256 check, so
        the upload is begun again rather than served wrong. ``sha256`` syncs each file
        before it is checked, so what is placed is on disk.
        """
        path = self._staged(upload_id, index)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_CLOEXEC", 0), 0o640)
        try:
            view = memoryview(data)
            while view:
                written = os.pwrite(fd, view, offset)
                offset += written
                view = view[written:]
            return os.fstat(fd).st_size
        finally:
            os.close(fd)

    def sha256(self, upload_id: str, index: int) -> str | None:
        """The staged file's sha256 (None when it is not staged: already placed by an earlier attempt)."""
        digest = hashlib.sha256()
        try:
            with open(self._staged(upload_id, index), "rb") as handle:
                os.fsync(handle.fileno())
                while chunk := handle.read(HASH_CHUNK):
                    digest.update(chunk)
        except FileNotFoundError:
            return None
        return digest.hexdigest()

    def _target(self, key: str, project: str) -> str:
        """``<root>/<key>``, its parent directories made; UnsafePath if any of them is a symbolic link.

        Checked component by component before anything is made, so no directory is ever
        created through a link (e.g. ``<root>/<project>/<run>`` pointing elsewhere).
        """
        parts = key.split("/")
        if parts[0] != project or len(parts) < 2:
            raise UnsafePath("outside the project's directory of the storage root")
        folder = self.root
        for part in parts[:-1]:
            folder = os.path.join(folder, part)
            if os.path.islink(folder):
                raise UnsafePath("the upload would leave the project's directory through a symbolic link")
            with contextlib.suppress(FileExistsError):
                os.mkdir(folder)
            if not os.path.isdir(folder) or os.path.islink(folder):
                raise UnsafePath("a path component of the upload is not a directory")
        target = os.path.join(folder, parts[-1])
        if os.path.islink(target):
            raise UnsafePath("the upload's target is a symbolic link")
        return target

    def place(self, upload_id: str, path: str, kind: str, files: list[dict[str, Any]], project: str) -> None:
        """Move the staged files to ``<root>/<path>`` (safe to call again after a crash part-way)."""
        target = self._target(path, project)
        if kind == "file":
            staged = self._staged(upload_id, 0)
            if os.path.exists(staged):
                os.replace(staged, target)
            self.discard(upload_id)
            return
        tmp = os.path.join(os.path.dirname(target), f".{os.path.basename(target)}.{upload_id}.part")
        for index, entry in enumerate(files):
            staged = self._staged(upload_id, index)
            dest = os.path.join(tmp, *entry["path"].split("/"))
            if os.path.exists(staged):
                os.makedirs(os.path.dirname(dest), exist_ok=True)
                os.replace(staged, dest)
        os.makedirs(tmp, exist_ok=True)
        old = None
        if os.path.lexists(target):  # the same step uploaded again: the new tree replaces it
            old = os.path.join(os.path.dirname(target), f".{os.path.basename(target)}.{upload_id}.old")
            os.replace(target, old)
        os.replace(tmp, target)
        if old is not None:
            _remove(old)
        self.discard(upload_id)

    def discard(self, upload_id: str) -> None:
        """Delete whatever is staged for the upload."""
        _remove(os.path.join(self.root, STAGING, upload_id))


def _remove(path: str) -> None:
    with contextlib.suppress(FileNotFoundError):
        if os.path.isdir(path) and not os.path.islink(path):
            shutil.rmtree(path)
        else:
            os.unlink(path)


class S3UploadStore:
    """Multipart uploads at the final keys of an ``S3Storage``; the trainer sends the parts."""

    def __init__(self, storage: S3Storage, chunk_bytes: int) -> None:
        self.storage = storage
        self.client = storage.client
        self.bucket = storage.bucket
        self.chunk_bytes = chunk_bytes

    def key(self, rel: str) -> str:
        prefix = self.storage.prefix
        return f"{prefix}/{rel}" if prefix else rel

    def part_bytes(self, size: int) -> int:
        return max(self.chunk_bytes, S3_MIN_PART, -(-size // S3_MAX_PARTS))

    def begin(self, rel: str) -> str | None:
        """A multipart upload id for the object ``rel`` (None for an empty file: put at completion)."""
        return self.client.create_multipart_upload(Bucket=self.bucket, Key=self.key(rel))["UploadId"]

    def done_parts(self, rel: str, upload_id: str) -> dict[int, dict[str, Any]]:
        """Part number -> {ETag, Size} of the parts the store holds."""
        out: dict[int, dict[str, Any]] = {}
        marker = 0
        while True:
            page = self.client.list_parts(Bucket=self.bucket, Key=self.key(rel), UploadId=upload_id,
                                          PartNumberMarker=marker)
            for part in page.get("Parts", []):
                out[int(part["PartNumber"])] = {"ETag": part["ETag"], "Size": int(part["Size"])}
            if not page.get("IsTruncated"):
                return out
            marker = int(page["NextPartNumberMarker"])

    def presign(self, rel: str, upload_id: str, number: int) -> str:
        return self.client.generate_presigned_url(
            "upload_part",
            Params={"Bucket": self.bucket, "Key": self.key(rel), "UploadId": upload_id, "PartNumber": number},
            ExpiresIn=PRESIGN_SECONDS,
        )

    def complete(self, rel: str, upload_id: str | None, parts: dict[int, dict[str, Any]]) -> None:
        if upload_id is None:
            self.client.put_object(Bucket=self.bucket, Key=self.key(rel), Body=b"")
            return
        self.client.complete_multipart_upload(
            Bucket=self.bucket, Key=self.key(rel), UploadId=upload_id,
            MultipartUpload={"Parts": [{"PartNumber": n, "ETag": parts[n]["ETag"]} for n in sorted(parts)]},
        )

    def sha256(self, rel: str) -> str | None:
        """The stored object's sha256, read back from the store; None when there is no object."""
        from botocore.exceptions import ClientError

        digest = hashlib.sha256()
        try:
            body = self.client.get_object(Bucket=self.bucket, Key=self.key(rel))["Body"]
        except ClientError:
            return None
        try:
            while chunk := body.read(HASH_CHUNK):
                digest.update(chunk)
        finally:
            body.close()
        return digest.hexdigest()

    def exists(self, rel: str) -> bool:
        from botocore.exceptions import ClientError

        try:
            self.client.head_object(Bucket=self.bucket, Key=self.key(rel))
        except ClientError:
            return False
        return True

    def discard(self, rel: str, upload_id: str | None) -> None:
        """Abort the multipart upload and delete the object (a rejected upload leaves nothing)."""
        from botocore.exceptions import ClientError

        if upload_id is not None:
            with contextlib.suppress(ClientError):
                self.client.abort_multipart_upload(Bucket=self.bucket, Key=self.key(rel), UploadId=upload_id)
        with contextlib.suppress(ClientError):
            self.client.delete_object(Bucket=self.bucket, Key=self.key(rel))


UploadStore = LocalUploadStore | S3UploadStore


def upload_store_for(storage: object, settings: Any) -> UploadStore:
    """The upload side of the configured storage backend."""
    if isinstance(storage, S3Storage):
        return S3UploadStore(storage, settings.upload_chunk_bytes)
    return LocalUploadStore(settings.checkpoint_root)
