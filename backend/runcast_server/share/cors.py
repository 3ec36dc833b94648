"""CORS for the public read API only: GET and HEAD of run data, from the allowed origins.

Starlette's ``CORSMiddleware`` answers for the paths below (reads of runs, project feeds,
badges); a request to any other path, or with any other method, passes through untouched,
so a write route never names an allowed origin and a cross-origin preflight for a write
gets no ``Access-Control-Allow-Origin``: the browser refuses to send it. Credentials
(cookies) are never allowed; a script that holds a project token may send it as
``Authorization`` to read that project's private runs, as any HTTP client can.
"""

from __future__ import annotations

from starlette.middleware.cors import CORSMiddleware
from starlette.types import ASGIApp, Receive, Scope, Send

READ_PREFIXES = ("/api/v1/runs", "/api/v1/projects/", "/badge/")
READ_METHODS = ("GET", "HEAD")
ALLOWED_HEADERS = ["Authorization", "Accept", "Last-Event-ID", "If-None-Match"]
EXPOSED_HEADERS = ["ETag", "Content-Disposition", "Retry-After"]


class PublicReadCors:
    """ASGI middleware: CORS on public reads for ``origins`` ("*" = any); nothing elsewhere."""

    def __init__(self, app: ASGIApp, origins: list[str]) -> None:
        self.app = app
        self.cors = CORSMiddleware(
            app,
            allow_origins=origins,
            allow_methods=list(READ_METHODS),
            allow_headers=ALLOWED_HEADERS,
            expose_headers=EXPOSED_HEADERS,
            allow_credentials=False,
            max_age=600,
        )

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http" and self._is_read(scope):
            await self.cors(scope, receive, send)
        else:
            await self.app(scope, receive, send)

    @staticmethod
    def _is_read(scope: Scope) -> bool:
        path: str = scope.get("path", "")
        if not path.startswith(READ_PREFIXES):
            return False
        method = scope["method"]
        if method == "OPTIONS":  # a preflight: only for a read
            headers = dict(scope.get("headers") or [])
            return headers.get(b"access-control-request-method", b"").decode("latin-1").upper() in READ_METHODS
        return method in READ_METHODS
