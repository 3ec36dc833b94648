"""The request body limit of every route, enforced before the body is read.

An ASGI middleware: a ``Content-Length`` over the route's limit is answered 413 at
once, without reading a byte of the body; a body sent without one (chunked) is
counted as the app reads it, and the moment it passes the limit the client gets the
413 and the app sees a disconnect. Either way the process never holds more than the
limit (plus one chunk) of a request body.
"""

from __future__ import annotations

from collections.abc import Callable

from starlette.responses import Response
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from runcast_server.errors import error_body, error_response


def _too_large(limit: int) -> Response:
    return error_response(413, error_body(f"request body over {limit} bytes", field="body"))


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
        if declared is not None:
            if not declared.isdigit():
                response = error_response(400, error_body("Content-Length must be a number of bytes",
                                                          field="Content-Length"))
                await response(scope, receive, send)
                return
            if int(declared) > limit:
                await _too_large(limit)(scope, receive, send)
                return
        received = 0
        refused = False
        started = False

        async def limited_receive() -> Message:
            nonlocal received, refused
            if refused:
                return {"type": "http.disconnect"}
            message = await receive()
            if message["type"] == "http.request":
                received += len(message.get("body", b""))
                if received > limit:
                    refused = True
                    if not started:
                        await _too_large(limit)(scope, receive, send)
                    return {"type": "http.disconnect"}
            return message

        async def guarded_send(message: Message) -> None:
            nonlocal started
            if refused:
                return  # the app answering the disconnect it was shown: the client has its 413
            if message["type"] == "http.response.start":
                started = True
            await send(message)

        await self.app(scope, limited_receive, guarded_send)
