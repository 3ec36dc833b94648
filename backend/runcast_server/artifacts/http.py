"""The checkpoint download response: streamed, HEAD, one ``Range`` per request, If-Range, ETag.

* ``ETag`` is the quoted sha256 of the file when the trainer recorded one (a strong
  validator: the bytes are fixed by it), else ``"m-<size>-<mtime_ns>"``.
* ``Range: bytes=a-b`` / ``a-`` / ``-n`` (one range) gives 206 with ``Content-Range``; a
  range that starts past the end gives 416 with ``Content-Range: bytes */size``; a
  header that does not parse, or asks for several ranges, is ignored (200, the whole
  file), as RFC 9110 allows.
* ``If-Range`` with an ETag (or the Last-Modified date) that does not match the
  current file: the Range is ignored and the whole file comes back (200), so a
  resuming client never glues two different files together.
* The body is read with ``os.pread`` in a worker thread, ``chunk_size`` bytes at a
  time, the next chunk while the current one is being sent; when the server offers the ASGI ``http.response.pathsend`` extension and the
  whole file is asked for, the server sends the file itself (sendfile: zero-copy).
  Uvicorn does not offer it, so there the body goes through the event loop. A remote
  backend's reader (S3) is told the span first and streams it from one ranged GET.
* A client that disconnects stops the reads at once (the receive channel is watched),
  so a broken download costs no reads beyond what was sent.
* Behind nginx (``accel_prefix``, the ``download_accel_prefix`` setting) a local file is
  not sent by this process: the answer is ``X-Accel-Redirect: <prefix><key>`` with the
  headers above, and nginx's internal location sends the bytes (sendfile) and applies
  Range and If-Range itself. An unsatisfiable range is still answered here (JSON 416).
"""

from __future__ import annotations

import asyncio
import os
import re
from email.utils import formatdate, parsedate_to_datetime
from pathlib import PurePosixPath
from urllib.parse import quote

import anyio
from starlette.datastructures import Headers
from starlette.responses import Response
from starlette.types import Receive, Scope, Send

from runcast_server.artifacts.storage import LocalStorage, Reader, Storage, StoredObject

_RANGE = re.compile(r"^\s*bytes\s*=\s*(\d*)\s*-\s*(\d*)\s*$", re.IGNORECASE)


class RangeNotSatisfiable(Exception):
    pass


def parse_range(header: str, size: int) -> tuple[int, int] | None:
    """``(start, end_exclusive)`` of a single byte range; None to ignore the header.

    Raises RangeNotSatisfiable when the range is well formed but starts at or past
    ``size`` (or is a zero-length suffix).
    """
    match = _RANGE.match(header)
    if match is None:
        return None  # malformed, another unit, or several ranges: serve the whole file
    first, last = match.groups()
    if not first and not last:
        return None
    if not first:  # suffix: the last N bytes
        n = int(last)
        if n == 0 or size == 0:
            raise RangeNotSatisfiable
        return max(0, size - n), size
    start = int(first)
    end = int(last) + 1 if last else size
    if last and end <= start:
        return None  # 'bytes=10-5' is invalid syntax: ignore it
    if start >= size:
        raise RangeNotSatisfiable
    return start, min(end, size)


def content_disposition(filename: str, kind: str = "attachment") -> str:
    """RFC 6266: an ASCII fallback in ``filename=`` and the exact name in ``filename*``."""
    fallback = "".join(c if 32 <= ord(c) < 127 and c not in '"\\%' else "_" for c in filename) or "download"
    value = f'{kind}; filename="{fallback}"'
    if fallback != filename:
        value += f"; filename*=UTF-8''{quote(filename, safe='')}"
    return value


def etag_for(obj: StoredObject, sha256: str | None) -> str:
    if sha256:
        return f'"{sha256}"'
    return f'"m-{obj.size}-{int(obj.mtime * 1e9)}"'


def _if_range_matches(value: str, etag: str, last_modified: str, mtime: float) -> bool:
    value = value.strip()
    if value.startswith("W/"):
        return False  # weak validators never match If-Range
    if value.startswith('"'):
        return value == etag
    try:
        when = parsedate_to_datetime(value).timestamp()
    except (TypeError, ValueError):
        return False
    return value == last_modified or int(when) == int(mtime)


class CheckpointFileResponse(Response):
    """Stream ``obj`` from ``storage`` honouring Range, If-Range and HEAD."""

    def __init__(
        self,
        storage: Storage,
        obj: StoredObject,
        *,
        sha256: str | None,
        filename: str,
        chunk_size: int = 4 * 1024 * 1024,
        cache_control: str = "no-cache",
        accel_prefix: str | None = None,
        presign_s: int = 0,
    ) -> None:
        self.storage = storage
        self.obj = obj
        self.chunk_size = chunk_size
        self.accel_uri = _accel_uri(storage, obj, accel_prefix) if accel_prefix else None
        self.presign = (lambda: storage.presign(obj, content_disposition(filename), presign_s)) if presign_s > 0 else None
        self.status_code = 200
        self.background = None
        self.etag = etag_for(obj, sha256)
        self.last_modified = formatdate(obj.mtime, usegmt=True)
        self.init_headers(
            {
                "content-type": "application/octet-stream",
                "accept-ranges": "bytes",
                "etag": self.etag,
                "last-modified": self.last_modified,
                "content-disposition": content_disposition(filename),
                "cache-control": cache_control,
                "x-content-type-options": "nosniff",
            }
        )

    def _plan(self, scope: Scope) -> tuple[int, int, int]:
        """(status, start, end) for this request; status 416 means not satisfiable."""
        size = self.obj.size
        headers = Headers(scope=scope)
        header = headers.get("range")
        if header is None:
            return 200, 0, size
        if_range = headers.get("if-range")
        if if_range is not None and not _if_range_matches(if_range, self.etag, self.last_modified, self.obj.mtime):
            return 200, 0, size
        try:
            span = parse_range(header, size)
        except RangeNotSatisfiable:
            return 416, 0, 0
        if span is None:
            return 200, 0, size
        return 206, span[0], span[1]

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        status, start, end = self._plan(scope)
        headers = dict(self.headers)
        size = self.obj.size
        if status == 416:
            body = b'{"error":{"message":"range not satisfiable","field":"Range"}}'
            headers.update(
                {"content-range": f"bytes */{size}", "content-type": "application/json", "content-length": str(len(body))}
            )
            await send({"type": "http.response.start", "status": 416, "headers": _raw(headers)})
            await send({"type": "http.response.body", "body": body})
            return
        location = self.presign() if self.presign is not None and scope["method"] == "GET" else None
        if location is not None:
            # The bucket sends the bytes (Range and resume included: clients repeat their headers on
            # a 307). The URL is a credential for this reader only, valid presign_s seconds.
            redirect = {"location": location, "cache-control": "private, no-store", "content-length": "0",
                        "x-content-type-options": "nosniff"}
            await send({"type": "http.response.start", "status": 307, "headers": _raw(redirect)})
            await send({"type": "http.response.body", "body": b""})
            return
        if self.accel_uri is not None:
            # nginx keeps Content-Type, Content-Disposition and Cache-Control from here; the
            # location re-adds ETag; its static handler sets the length, range and body.
            headers["x-accel-redirect"] = self.accel_uri
            headers["content-length"] = "0"
            del headers["accept-ranges"]  # nginx adds its own
            await send({"type": "http.response.start", "status": 200, "headers": _raw(headers)})
            await send({"type": "http.response.body", "body": b""})
            return
        headers["content-length"] = str(end - start)
        if status == 206:
            headers["content-range"] = f"bytes {start}-{end - 1}/{size}"
        await send({"type": "http.response.start", "status": status, "headers": _raw(headers)})
        if scope["method"] == "HEAD" or end == start:
            await send({"type": "http.response.body", "body": b""})
            return
        pathsend = "http.response.pathsend" in scope.get("extensions", {})
        if pathsend and status == 200 and self.obj.path is not None:
            await send({"type": "http.response.pathsend", "path": str(self.obj.path)})
            return
        reader = await anyio.to_thread.run_sync(self.storage.open, self.obj)
        span = getattr(reader, "span", None)
        if span is not None:
            span(start, end)  # a remote reader streams [start, end) in one request
        try:
            async with anyio.create_task_group() as group:

                async def watch_disconnect() -> None:
                    while True:
                        message = await receive()
                        if message["type"] == "http.disconnect":
                            group.cancel_scope.cancel()
                            return

                group.start_soon(watch_disconnect)
                await self._stream(reader, start, end, send)
                group.cancel_scope.cancel()
        finally:
            reader.close()

    async def _stream(self, reader: Reader, start: int, end: int, send: Send) -> None:
        """Send ``[start, end)``; the next chunk is read in a thread while this one is sent."""
        loop = asyncio.get_running_loop()

        def read(position: int) -> asyncio.Future[bytes]:
            return loop.run_in_executor(None, reader.read_at, position, min(self.chunk_size, end - position))

        position = start
        pending = read(position)
        try:
            while position < end:
                chunk = await pending
                if not chunk:
                    # The file shrank under us: end the body short; the client sees a broken transfer.
                    raise RuntimeError(f"checkpoint {self.obj.key} is shorter than its recorded size")
                position += len(chunk)
                if position < end:
                    pending = read(position)
                await send({"type": "http.response.body", "body": chunk, "more_body": position < end})
        finally:
            if not pending.done():
                with anyio.CancelScope(shield=True):  # never close the file under a running read
                    await asyncio.wait([pending])
            if pending.done() and not pending.cancelled():
                pending.exception()  # retrieved: no "never retrieved" warning


def _accel_uri(storage: Storage, obj: StoredObject, prefix: str) -> str | None:
    """``prefix`` + the local file's path under the storage root with symbolic links resolved,
    as ``locate`` checked it (nginx then follows no link that may have changed since);
    None for a backend without local files (S3)."""
    if not isinstance(storage, LocalStorage) or obj.path is None:
        return None
    key = os.path.relpath(obj.path, os.path.realpath(storage.root))
    return prefix + quote(PurePosixPath(key).as_posix(), safe="/")


def _raw(headers: dict[str, str]) -> list[tuple[bytes, bytes]]:
    return [(k.lower().encode("latin-1"), v.encode("latin-1")) for k, v in headers.items()]
