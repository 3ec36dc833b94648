"""Images kept in a spool (``<spool>/blobs/<sha256>``) until the server holds them.

The media worker writes an image here, durably, when the server cannot be reached (or the run
is offline), before its ``media`` event is queued. Whoever sends the spool (the sender after an
outage, ``runcast sync``) sends a batch holding such events in three steps: the events before
the first of them (the run's start may be among them: the server takes a blob only for a run it
knows), then each image (``HEAD``, ``PUT``; its file deleted once stored), then the rest. A media
event whose image the server refuses for good is left out of its batch and reported as refused,
so that the batch's other events are not refused with it; its file stays.
"""

from __future__ import annotations

import contextlib
import os
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final

from ..image_codec import image_header
from ..wire import events as schema
from .blob_http import BlobClient, NotYet
from .spool import BLOBS
from .transport import Rejected, Transport

if TYPE_CHECKING:
    from .spool_parts import Parts

SPOOLED: Final = "_spooled_blob"  # marks a queued media event whose image waits in the spool (the sender spools it)

Refused = list[tuple[bytes, int, Rejected]]  # (a part's body, its events, the server's answer)


def write_blob(spool: Path, sha256: str, data: bytes) -> None:
    """Keep ``data`` as ``<spool>/blobs/<sha256>``: written, fsync'd and renamed into place."""
    folder = spool / BLOBS
    folder.mkdir(exist_ok=True)
    target = folder / sha256
    tmp = folder / f".{sha256}.tmp"
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    try:
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view):]
        os.fsync(fd)
    finally:
        os.close(fd)
    os.replace(tmp, target)
    with contextlib.suppress(OSError):
        dir_fd = os.open(folder, os.O_RDONLY)
        try:
            os.fsync(dir_fd)
        finally:
            os.close(dir_fd)


def spooled(spool: Path, event: dict[str, Any]) -> bool:
    """Whether ``event`` is a media event whose image waits in the spool."""
    blob = event.get("blob") if event.get("type") == "media" else None
    return isinstance(blob, str) and (spool / BLOBS / blob).is_file()


def send_with_blobs(parts: Parts, transport: Transport, blobs: BlobClient | None, spool: Path, body: bytes,
                    events: list[dict[str, Any]], timeout: float, stop_on: tuple[int, ...],
                    blob_wait: float) -> tuple[int, Refused]:
    """``parts.send`` of one spooled batch (``spool_replay.Parts``), its spooled images stored first
    (``blob_wait``: how long to wait for the server to know the run). Raises as ``Parts.send``."""
    waiting = [i for i, e in enumerate(events) if spooled(spool, e)] if blobs is not None else []
    if not waiting:
        return parts.send(transport, body, events, timeout, stop_on)
    assert blobs is not None
    first = waiting[0]
    sent, refused = _send(parts, transport, events[:first], timeout, stop_on)
    rest: list[dict[str, Any]] = []
    for event in events[first:]:
        try:
            if spooled(spool, event):
                _push(blobs, spool, event["run"], event["blob"], blob_wait)
        except Rejected as exc:
            if exc.status in stop_on:
                raise
            refused.append((schema.dumps_batch([event]), 1, exc))
            continue
        rest.append(event)
    more, refused_more = _send(parts, transport, rest, timeout, stop_on)
    return sent + more, refused + refused_more


def _send(parts: Parts, transport: Transport, events: list[dict[str, Any]], timeout: float,
          stop_on: tuple[int, ...]) -> tuple[int, Refused]:
    if not events:
        return 0, []
    return parts.send(transport, schema.dumps_batch(events), events, timeout, stop_on)


def _push(blobs: BlobClient, spool: Path, run: str, sha256: str, wait: float) -> None:
    """Store one spooled image on the server and delete its file; NotYet after ``wait`` s of 404."""
    path = spool / BLOBS / sha256
    data = path.read_bytes()
    found = image_header(data)
    if found is None:
        raise Rejected(f"{path} is not a PNG or JPEG file", 422, "blob")
    deadline = time.monotonic() + wait
    delay = 0.1
    while True:
        try:
            blobs.store(run, sha256, data, found[0])
            break
        except NotYet:
            if time.monotonic() + delay > deadline:
                raise
            time.sleep(delay)
            delay = min(2.0, delay * 2)
    path.unlink(missing_ok=True)
