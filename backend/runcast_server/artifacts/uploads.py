"""Checkpoints published over HTTP: the manifest rules, resumable uploads, verification.

A trainer that does not share the server's storage asks ``begin`` to publish a checkpoint
(a file, or a directory tree) with its manifest (each file's relative path, size and
sha256) and the checkpoint event's fields. The server either finds the very bytes in
place (the trainer writes into the storage root: nothing to send) or opens an upload at
``<project>/<run>/step-<N>/<name>``. The same checkpoint asked for again (same run, path
and manifest: a restarted trainer) continues the same upload from what is stored.

Bytes arrive in chunks (``receive``: each with its own sha256, written at the offset the
upload has reached) or, with S3, as parts the trainer sends to presigned URLs. ``finish``
checks every file against its sha256, moves it into place and only then records the
checkpoint event (through the ingest inbox, like any batch): a checkpoint is listed
``available`` only once the server has verified its bytes. A file that does not match
fails the upload and nothing of it is kept.
"""

from __future__ import annotations

import hashlib
import json
import re
import time
import uuid
from dataclasses import dataclass
from typing import Any, Final

from runcast.wire.events import MAX_INT, SCHEMA_VERSION, SHA256_RE, EventError, validate_event
from sqlalchemy import select
from sqlalchemy.orm import Session

from runcast_server.artifacts.models import Upload
from runcast_server.artifacts.storage import NotStored, Storage, UnsafePath
from runcast_server.artifacts.upload_store import (
    LocalUploadStore,
    S3UploadStore,
    UploadStore,
    file_target,
)
from runcast_server.record.models import Run, Segment

MAX_NAME_BYTES: Final = 255
MAX_PATH_BYTES: Final = 1024
# What _component and check_manifest accept, as patterns for the OpenAPI document (lengths there count
# characters: a name of at most 255 characters may still be over 255 bytes).
_COMPONENT = r"(?!\.\.?(?:/|$))(?:[^%/\\\x00-\x1f\x7f]|%(?![0-9A-Fa-f]{2}))+"
NAME_PATTERN: Final = rf"^{_COMPONENT}$"
RELATIVE_PATH_PATTERN: Final = rf"^(?![A-Za-z]:){_COMPONENT}(?:/{_COMPONENT})*$"
MAX_PRESIGNED: Final = 500  # presigned part URLs per answer; the trainer asks again for more
_PERCENT_ESCAPE = re.compile(r"%[0-9A-Fa-f]{2}")


class UploadRejected(Exception):
    """A request the upload rules refuse; ``status`` and ``field`` go into the JSON error."""

    def __init__(self, status: int, message: str, field: str) -> None:
        super().__init__(message)
        self.status = status
        self.message = message
        self.field = field


@dataclass(frozen=True)
class Limits:
    chunk_bytes: int
    max_bytes: int
    max_files: int


def _component(part: str, field: str) -> None:
    if part in ("", ".", ".."):
        raise UploadRejected(422, f"{part!r} is not allowed as a path component", field)
    if any(c in part for c in "/\\\x00") or any(ord(c) < 32 or ord(c) == 127 for c in part):
        raise UploadRejected(422, "path components may not hold '/', '\\', NUL or control characters", field)
    if _PERCENT_ESCAPE.search(part):
        raise UploadRejected(422, "percent-encoded characters in a path are refused", field)
    if len(part.encode("utf-8", "surrogatepass")) > MAX_NAME_BYTES:
        raise UploadRejected(422, f"path component longer than {MAX_NAME_BYTES} bytes", field)
    try:
        part.encode("utf-8")
    except UnicodeEncodeError:
        raise UploadRejected(422, "path is not valid UTF-8", field) from None


def check_manifest(body: dict[str, Any], limits: Limits) -> tuple[str, str, list[dict[str, Any]]]:
    """``(name, kind, files)`` of a begin request; UploadRejected naming the field otherwise.

    Every relative path is checked lexically: no absolute path, no ``..``, no backslash,
    no NUL; no two entries the same, no file that is also a directory of another.
    """
    name, kind, raw = body.get("name"), body.get("kind"), body.get("files")
    if not isinstance(name, str):
        raise UploadRejected(422, "name must be the checkpoint's file or directory name", "name")
    _component(name, "name")
    if kind not in ("file", "directory"):
        raise UploadRejected(422, "kind must be 'file' or 'directory'", "kind")
    if not isinstance(raw, list) or not raw:
        raise UploadRejected(422, "files must be a non-empty list of {path, size, sha256}", "files")
    if len(raw) > limits.max_files:
        raise UploadRejected(413, f"more than {limits.max_files} files in one checkpoint", "files")
    files: list[dict[str, Any]] = []
    total = 0
    for i, entry in enumerate(raw):
        field = f"files[{i}]"
        if not isinstance(entry, dict):
            raise UploadRejected(422, "each file is {path, size, sha256}", field)
        path, size, sha = entry.get("path"), entry.get("size"), entry.get("sha256")
        if not isinstance(path, str) or not path:
            raise UploadRejected(422, "path must be a relative path", f"{field}.path")
        if path.startswith("/") or re.match(r"^[A-Za-z]:", path):
            raise UploadRejected(422, "absolute paths are refused", f"{field}.path")
        if len(path.encode("utf-8", "surrogatepass")) > MAX_PATH_BYTES:
            raise UploadRejected(422, f"path longer than {MAX_PATH_BYTES} bytes", f"{field}.path")
        for part in path.split("/"):
            _component(part, f"{field}.path")
        if type(size) is not int or not 0 <= size <= MAX_INT:
            raise UploadRejected(422, "size must be a whole number of bytes (64 bits)", f"{field}.size")
        if not isinstance(sha, str) or not SHA256_RE.match(sha):
            raise UploadRejected(422, "sha256 must be 64 lowercase hex characters", f"{field}.sha256")
        total += size
        files.append({"path": path, "size": size, "sha256": sha})
    if total > limits.max_bytes:
        raise UploadRejected(413, f"the checkpoint is over the server's upload limit of {limits.max_bytes} bytes", "files")
    if kind == "file" and (len(files) != 1 or files[0]["path"] != name):
        raise UploadRejected(422, "a file checkpoint has one entry, named like the checkpoint", "files")
    paths = [f["path"] for f in files]
    if len(set(paths)) != len(paths):
        raise UploadRejected(422, "the same path is listed twice", "files")
    dirs = {p.rsplit("/", i)[0] for p in paths for i in range(1, p.count("/") + 1)}
    clash = dirs.intersection(paths)
    if clash:
        raise UploadRejected(422, f"{min(clash)!r} is both a file and a directory", "files")
    return name, kind, files


def fingerprint(kind: str, files: list[dict[str, Any]]) -> str:
    canonical = json.dumps({"kind": kind, "files": files}, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(canonical.encode()).hexdigest()


def _event(body: dict[str, Any], run: Run, path: str, kind: str, files: list[dict[str, Any]]) -> dict[str, Any]:
    """The checkpoint event recorded once the bytes are verified (validated now)."""
    event = {
        "v": SCHEMA_VERSION,
        "type": "checkpoint",
        "run": run.id,
        "segment": body.get("segment"),
        "seq": body.get("seq"),
        "ts": body.get("ts"),
        "step": body.get("step"),
        "path": path,
        "size": sum(f["size"] for f in files),
        "sha256": files[0]["sha256"] if kind == "file" else None,
        "metrics": body.get("metrics") or {},
        "public": body.get("public", True),
        "status": "available",
    }
    try:
        validate_event(event)
    except EventError as exc:
        raise UploadRejected(422, exc.message, exc.field or "body") from None
    return event


def begin(
    session: Session, *, run: Run, project: str, body: dict[str, Any], storage: Storage, store: UploadStore, limits: Limits
) -> Upload:
    """Open (or resume) the upload of one checkpoint, or find it in place; the row is flushed."""
    name, kind, files = check_manifest(body, limits)
    segment = body.get("segment")
    if not isinstance(segment, str) or session.scalar(
        select(Segment.id).where(Segment.run_id == run.id, Segment.uid == segment)
    ) is None:
        raise UploadRejected(404, "unknown segment of this run (its run_started is not stored yet)", "segment")
    step = body.get("step")
    target = f"{project}/{run.id}/step-{step}/{name}"
    _event(body, run, target, kind, files)  # every field checked before anything is written
    trainer_path = body.get("path")
    if isinstance(trainer_path, str) and trainer_path and _in_place(storage, trainer_path, project, kind, files):
        return _record_in_place(session, run, body, trainer_path, kind, files)
    digest = fingerprint(kind, files)
    row = session.scalar(select(Upload).where(Upload.run_id == run.id, Upload.path == target, Upload.fingerprint == digest))
    if row is not None and row.state == "done":
        return row
    event = _event(body, run, target, kind, files)
    if row is None:
        row = Upload(
            id=uuid.uuid4().hex, run_id=run.id, project_id=run.project_id, path=target, fingerprint=digest,
            kind=kind, mode="upload", size=event["size"], files=files, event=event, parts=None,
            state="open", created_at=time.time(), completed_at=None,
        )
        session.add(row)
    else:  # a restarted trainer: same bytes, its own segment and seq now
        row.event = event
        if row.state == "failed":  # begun again after a mismatch: fresh bytes, fresh S3 uploads
            row.state, row.parts = "open", None
    if isinstance(store, S3UploadStore) and row.parts is None:
        row.parts = [
            {"upload_id": store.begin(file_target(target, kind, f["path"])) if f["size"] else None,
             "part_bytes": store.part_bytes(f["size"])}
            for f in files
        ]
    session.flush()
    return row


def _in_place(storage: Storage, path: str, project: str, kind: str, files: list[dict[str, Any]]) -> bool:
    """Whether the server sees exactly these bytes at the trainer's path (its storage is shared)."""
    try:
        located = storage.locate(path, within=project)
    except (UnsafePath, NotStored):
        return False
    if kind == "file":
        return not located.is_dir and located.size == files[0]["size"] and _stored_sha256(storage, path, project) == files[0]["sha256"]
    if not located.is_dir or located.path is None:
        return False  # an S3 "directory" is uploaded rather than compared object by object
    for entry in files:
        sub = f"{path.rstrip('/')}/{entry['path']}"
        try:
            obj = storage.locate(sub, within=project)
        except (UnsafePath, NotStored):
            return False
        if obj.is_dir or obj.size != entry["size"] or _stored_sha256(storage, sub, project) != entry["sha256"]:
            return False
    return True


def _stored_sha256(storage: Storage, path: str, project: str) -> str | None:
    obj = storage.locate(path, within=project)
    digest = hashlib.sha256()
    reader = storage.open(obj)
    try:
        offset = 0
        span = getattr(reader, "span", None)
        if span is not None:
            span(0, obj.size)
        while offset < obj.size:
            chunk = reader.read_at(offset, min(4 * 1024 * 1024, obj.size - offset))
            if not chunk:
                return None
            digest.update(chunk)
            offset += len(chunk)
    finally:
        reader.close()
    return digest.hexdigest()


def _record_in_place(
    session: Session, run: Run, body: dict[str, Any], path: str, kind: str, files: list[dict[str, Any]]
) -> Upload:
    digest = fingerprint(kind, files)
    row = session.scalar(select(Upload).where(Upload.run_id == run.id, Upload.path == path, Upload.fingerprint == digest))
    if row is not None and row.state == "done":
        return row
    event = _event(body, run, path, kind, files)
    if row is None:
        row = Upload(
            id=uuid.uuid4().hex, run_id=run.id, project_id=run.project_id, path=path, fingerprint=digest,
            kind=kind, mode="in_place", size=event["size"], files=files, event=event, parts=None,
            state="placing", created_at=time.time(), completed_at=None,
        )
        session.add(row)
    session.flush()
    return row


def find(session: Session, run: Run, upload_id: str) -> Upload:
    """The run's upload ``upload_id``; 404 for any other (another run's id answers the same)."""
    row = session.get(Upload, upload_id) if re.fullmatch(r"[0-9a-f]{32}", upload_id or "") else None
    if row is None or row.run_id != run.id:
        raise UploadRejected(404, "no such upload for this run", "upload")
    return row


def receive(store: UploadStore, row: Upload, index: int, offset: int, data: bytes, chunk_sha256: str | None,
            limits: Limits) -> int:
    """Store one chunk of file ``index`` at ``offset``; returns the bytes of that file now received."""
    if row.state != "open":
        raise UploadRejected(409, f"the upload is {row.state}", "upload")
    if not isinstance(store, LocalUploadStore):
        raise UploadRejected(409, "with S3 storage the parts go to the presigned URLs", "upload")
    if not 0 <= index < len(row.files):
        raise UploadRejected(404, "no such file in the upload's manifest", "index")
    if not chunk_sha256 or not SHA256_RE.match(chunk_sha256):
        raise UploadRejected(422, "send the chunk's sha256 (64 lowercase hex characters)", "X-Runcast-Chunk-Sha256")
    if hashlib.sha256(data).hexdigest() != chunk_sha256:
        raise UploadRejected(422, "the chunk does not match its sha256; nothing was written", "X-Runcast-Chunk-Sha256")
    size = row.files[index]["size"]
    received = store.received(row.id, index)
    if offset != received:
        raise UploadRejected(409, f"this file has {received} bytes: send from offset {received}", "offset")
    if len(data) > limits.chunk_bytes or offset + len(data) > size:
        raise UploadRejected(413, f"a chunk is at most {limits.chunk_bytes} bytes and may not pass the file's size", "body")
    return store.write(row.id, index, offset, data)


def state(store: UploadStore, row: Upload, limits: Limits) -> dict[str, Any]:
    """The answer to begin: where the upload stands and, with S3, where to send the missing parts."""
    out: dict[str, Any] = {"id": row.id, "state": row.state, "mode": row.mode, "kind": row.kind, "size": row.size,
                           "chunk_bytes": limits.chunk_bytes, "files": []}
    if row.state != "open":
        return out
    budget = MAX_PRESIGNED
    for index, entry in enumerate(row.files):
        item: dict[str, Any] = {"index": index, "path": entry["path"], "size": entry["size"]}
        if isinstance(store, S3UploadStore):
            meta = (row.parts or [])[index]
            rel = file_target(row.path, row.kind, entry["path"])
            held = store.done_parts(rel, meta["upload_id"]) if meta["upload_id"] else {}
            count = -(-entry["size"] // meta["part_bytes"])
            missing = [n for n in range(1, count + 1) if n not in held]
            item["part_bytes"] = meta["part_bytes"]
            item["received"] = sum(p["Size"] for p in held.values())
            item["parts"] = [{"number": n, "url": store.presign(rel, meta["upload_id"], n)} for n in missing[:budget]]
            budget = max(0, budget - len(item["parts"]))
        else:
            item["received"] = store.received(row.id, index)
        out["files"].append(item)
    return out


def verify(store: UploadStore, row: Upload) -> None:
    """Check every received file against its sha256; UploadRejected (409 incomplete, 422 mismatch).

    On a mismatch every byte of the upload is dropped. With S3 the parts are assembled
    first and the objects read back.
    """
    if row.mode == "in_place" or row.state != "open":
        return
    if isinstance(store, S3UploadStore):
        _finish_s3(store, row)
        return
    for index, entry in enumerate(row.files):
        if entry["size"] == 0:
            store.write(row.id, index, 0, b"")  # an empty file gets no chunk
        got = store.received(row.id, index)
        if got != entry["size"]:
            raise UploadRejected(409, f"{entry['path']!r} has {got} of {entry['size']} bytes", f"files[{index}]")
    for index, entry in enumerate(row.files):
        if store.sha256(row.id, index) != entry["sha256"]:
            store.discard(row.id)
            raise UploadRejected(422, f"{entry['path']!r} does not match its sha256; the upload is discarded",
                                 f"files[{index}].sha256")


def place(store: UploadStore, row: Upload, project: str) -> None:
    """Move verified files into place (local storage; S3 objects are already at their keys). Idempotent."""
    if row.mode == "upload" and isinstance(store, LocalUploadStore):
        try:
            store.place(row.id, row.path, row.kind, row.files, project)
        except UnsafePath as exc:
            store.discard(row.id)
            raise UploadRejected(422, f"refused: {exc}; the upload is discarded", "path") from None


def _finish_s3(store: S3UploadStore, row: Upload) -> None:
    from botocore.exceptions import ClientError

    rels = [file_target(row.path, row.kind, f["path"]) for f in row.files]
    parts_meta = row.parts or []
    for index, (entry, rel) in enumerate(zip(row.files, rels)):
        upload_id = parts_meta[index]["upload_id"]
        try:
            held = store.done_parts(rel, upload_id) if upload_id else {}
        except ClientError:
            if store.exists(rel):
                continue  # assembled by an earlier attempt that stopped before recording it
            raise UploadRejected(409, f"the store lost the upload of {entry['path']!r}; begin it again",
                                 f"files[{index}]") from None
        count = -(-entry["size"] // parts_meta[index]["part_bytes"])
        if sorted(held) != list(range(1, count + 1)) or sum(p["Size"] for p in held.values()) != entry["size"]:
            got = sum(p["Size"] for p in held.values())
            raise UploadRejected(409, f"{entry['path']!r} has {got} of {entry['size']} bytes", f"files[{index}]")
        store.complete(rel, upload_id, held)
    for index, (entry, rel) in enumerate(zip(row.files, rels)):
        if store.sha256(rel) != entry["sha256"]:
            for i, other in enumerate(rels):
                store.discard(other, parts_meta[i]["upload_id"])
            raise UploadRejected(422, f"{entry['path']!r} does not match its sha256; the upload is discarded",
                                 f"files[{index}].sha256")


def discard(store: UploadStore, row: Upload) -> None:
    """Drop every byte of a failed upload."""
    if isinstance(store, S3UploadStore):
        for index, entry in enumerate(row.files):
            store.discard(file_target(row.path, row.kind, entry["path"]), (row.parts or [])[index]["upload_id"])
    else:
        store.discard(row.id)


def manifest_for(session: Session, run_id: str, path: str) -> list[dict[str, Any]] | None:
    """The verified manifest of the checkpoint recorded at ``path`` (newest), if it came through ``begin``."""
    row = session.scalar(
        select(Upload).where(Upload.run_id == run_id, Upload.path == path, Upload.state == "done")
        .order_by(Upload.completed_at.desc()).limit(1)
    )
    return list(row.files) if row is not None else None
