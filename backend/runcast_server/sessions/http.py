"""Shared caches never keep what a session cookie showed.

A response to a request with a bearer token is not stored by a shared cache unless it says so
(RFC 9111, 3.5); a response to a request with a cookie may be. So on the data paths, a request
carrying the session cookie gets ``Vary: Cookie`` and, unless the route chose a
``Cache-Control`` of its own (badges, figures and downloads mark the signed-in reader's answers
``private``), ``Cache-Control: private, no-cache``. Pages and static files are left alone: they
are the same for everyone.
"""

from __future__ import annotations

from starlette.datastructures import MutableHeaders
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from runcast_server.sessions.service import COOKIE

DATA_PREFIXES = ("/api/", "/badge/", "/embed/")
_COOKIE_NAME = COOKIE.encode() + b"="


class PrivateWhenSignedIn:
    """ASGI middleware: answers to session-cookie requests on the data paths are private."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or not scope["path"].startswith(DATA_PREFIXES) or not _has_cookie(scope):
            await self.app(scope, receive, send)
            return

        async def send_private(message: Message) -> None:
            if message["type"] == "http.response.start":
                headers = MutableHeaders(scope=message)
                headers.add_vary_header("Cookie")
                if "cache-control" not in headers:
                    headers["Cache-Control"] = "private, no-cache"
            await send(message)

        await self.app(scope, receive, send_private)


def _has_cookie(scope: Scope) -> bool:
    return any(name == b"cookie" and _COOKIE_NAME in value for name, value in scope.get("headers", ()))
