"""A directory checkpoint as files: the listing (each with its sha256) and one streamed tar.

The tar is produced as it is sent, one file after another, a chunk at a time: nothing
is assembled in memory or on disk first, so a 100 GB DeepSpeed tag costs the server
two chunks of memory. Each member carries its sha256 in a PAX header
(``RUNCAST.sha256``) when the checkpoint came with a manifest (uploaded, or verified
in place); members are named ``<checkpoint name>/<relative path>``.
"""

from __future__ import annotations

import tarfile
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any, Final

from runcast_server.artifacts.storage import Storage, StoredObject

BLOCK: Final = tarfile.BLOCKSIZE
RECORD: Final = tarfile.RECORDSIZE


@dataclass(frozen=True)
class Member:
    path: str  # relative to the checkpoint directory (POSIX)
    size: int
    sha256: str | None


def members(storage: Storage, obj: StoredObject, manifest: list[dict[str, Any]] | None) -> list[Member]:
    """The files of a directory checkpoint, as stored now, with the manifest's sha256 where it has one."""
    hashes = {f["path"]: (f["size"], f["sha256"]) for f in manifest or []}
    out = []
    for rel, size in storage.files(obj):
        known = hashes.get(rel)
        out.append(Member(rel, size, known[1] if known is not None and known[0] == size else None))
    return out


def tar_stream(
    storage: Storage, obj: StoredObject, files: list[Member], *, recorded_path: str, project: str, chunk: int, mtime: float
) -> Iterator[bytes]:
    """The tar archive of ``files`` (a plain iterator: run it in a worker thread)."""
    written = 0
    top = obj.name or "checkpoint"
    for member in files:
        info = tarfile.TarInfo(f"{top}/{member.path}")
        info.size = member.size
        info.mtime = int(mtime)
        info.mode = 0o644
        if member.sha256:
            info.pax_headers = {"RUNCAST.sha256": member.sha256}
        header = info.tobuf(tarfile.PAX_FORMAT, "utf-8", "surrogateescape")
        written += len(header)
        yield header
        sub = storage.locate(f"{recorded_path.rstrip('/')}/{member.path}", within=project)
        if sub.is_dir or sub.size != member.size:
            raise RuntimeError(f"{member.path} changed while the archive was sent")
        reader = storage.open(sub)
        try:
            span = getattr(reader, "span", None)
            if span is not None:
                span(0, member.size)
            offset = 0
            while offset < member.size:
                data = reader.read_at(offset, min(chunk, member.size - offset))
                if not data:
                    raise RuntimeError(f"{member.path} is shorter than listed")
                offset += len(data)
                yield data
        finally:
            reader.close()
        written += member.size
        pad = -member.size % BLOCK
        if pad:
            written += pad
            yield b"\0" * pad
    end = 2 * BLOCK
    end += -(written + end) % RECORD
    yield b"\0" * end
