"""The request body limit of every route, enforced before the body is read.

An ASGI middleware: a ``Content-Length`` over the route's limit is answered 413 at
once, without reading a byte of the body (whether or not the route would read it);
a body sent without one (chunked) is counted as the app reads it, and the read that
passes the limit raises ``BodyTooLarge``, which the error handlers answer with the
JSON 413. The process never holds more than the limit (plus one chunk) of a body.

Starlette's ``RequestBodyLimitMiddleware`` does the counting too, but answers some
paths in plain text and takes one limit per route at import time; the ingest limit
here is a setting.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

from starlette.exceptions import HTTPException
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from runcast_server.core.errors import error_body, error_response

_UPLOAD_CHUNK = re.compile(r"^/api/v1/runs/[^/]+/uploads/[^/]+/files/[^/]+$")
_UPLOAD_BEGIN = re.compile(r"^/api/v1/runs/[^/]+/uploads$")
_BLOB = re.compile(r"^/api/v1/runs/[^/]+/blobs/[^/]+$")


def body_limit(settings: Any, path: str) -> int:
    """The body limit of ``path``: ingest batches, checkpoint chunks and manifests, images, everything else."""
    if path == "/api/v1/ingest" or _UPLOAD_BEGIN.match(path):
        return settings.max_body_bytes
    if _UPLOAD_CHUNK.match(path):
        return settings.upload_chunk_bytes
    if _BLOB.match(path):
        return settings.max_blob_bytes
    return settings.max_request_bytes


class BodyTooLarge(HTTPException):
    """A request body over its limit, found while the app read it (answered 413 JSON)."""

    def __init__(self, limit: int) -> None:
        super().__init__(413, f"request body over {limit} bytes")


class BodyLimit:
    """413 JSON for a body over ``limit_for(path)`` bytes."""

    def __init__(self, app: ASGIApp, limit_for: Callable[[str], int]) -> None:
        self.app = app
        self.limit_for = limit_for

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        limit = self.limit_for(scope.get("path", ""))
        declared = next((v for k, v in scope.get("headers", ()) if k == b"content-length"), None)
        if declared is not None and (not declared.isdigit() or int(declared) > limit):
            status, message = (413, f"request body over {limit} bytes") if declared.isdigit() else (
                400, "Content-Length must be a number of bytes")
            await error_response(status, error_body(message, field="body"))(scope, receive, send)
            return
        received = 0

        async def limited_receive() -> Message:
            nonlocal received
            message = await receive()
            if message["type"] == "http.request":
                received += len(message.get("body", b""))
                if received > limit:
                    raise BodyTooLarge(limit)
            return message

        await self.app(scope, limited_receive, send)
