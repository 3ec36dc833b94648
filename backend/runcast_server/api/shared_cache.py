"""The run page's first reads as shared HTTP objects (docs/live.md, "Following a run through a cache").

An anonymous GET of a run's JSON reads (``/api/v1/runs/{id}`` and what the run page reads under
it: keys, ``/metrics`` windows, events, alerts, checkpoints, comments, reports...) is answered
``public, max-age=1, stale-while-revalidate=1`` with a strong ETag, so a cache in front (the
shipped nginx site, a CDN) answers a crowd's first loads. A request with a token or the session
cookie gets ``private, no-store``. Every answer gets ``Vary: Authorization, Cookie`` and a 304 when
its If-None-Match names the body's ETag. The body is what the route answered: the publication
policy (withheld kinds, the broadcast delay) is applied there, as for every read; a cached copy
is at most two seconds older, never earlier. Routes that chose a ``Cache-Control`` of their own
(the broadcast, downloads, media files) and the live stream are left alone.
"""

from __future__ import annotations

import re
from typing import Final

from starlette.datastructures import Headers, MutableHeaders
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from runcast_server.sessions.service import COOKIE
from runcast_server.share.http import etag_of

PUBLIC: Final = "public, max-age=1, stale-while-revalidate=1"
PRIVATE: Final = "private, no-store"
# A run, or one of the reads its page makes (the same list as the shipped nginx site's location);
# never the stream, the broadcast, an export or a file (streamed bodies, their own headers).
READS: Final = ("metrics", "events", "alerts", "checkpoints", "revisions", "evals", "samples", "samples/prompts",
                "media", "media/keys", "data-mix", "comments", "reports", "batch")
RUN_READ: Final = re.compile(r"^/api/v1/runs/[^/]+(?:/(?:" + "|".join(READS) + r"))?$")
_COOKIE_NAME: Final = COOKIE + "="


def credentialed(headers: Headers) -> bool:
    """A token (``Authorization``) or the dashboard's session cookie."""
    return "authorization" in headers or _COOKIE_NAME in headers.get("cookie", "")


class SharedRunReads:
    """ASGI middleware: cache headers, a strong ETag and 304s on a run's JSON GETs."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope["method"] != "GET" or not RUN_READ.match(scope["path"]):
            await self.app(scope, receive, send)
            return
        request_headers = Headers(scope=scope)
        private = credentialed(request_headers)
        start: Message | None = None
        chunks: list[bytes] = []

        async def hold(message: Message) -> None:
            nonlocal start
            if message["type"] == "http.response.start":
                headers = MutableHeaders(scope=message)
                json = headers.get("content-type", "").startswith("application/json")
                if message["status"] != 200 or not json or "cache-control" in headers:
                    await send(message)  # not one of ours: passed through as it comes
                    return
                start = message
                return
            if start is None or message["type"] != "http.response.body":
                await send(message)
                return
            chunks.append(message.get("body", b""))
            if message.get("more_body", False):
                return
            await send_cached(start, b"".join(chunks))

        async def send_cached(message: Message, body: bytes) -> None:
            headers = MutableHeaders(scope=message)
            etag = etag_of(body)
            headers["ETag"] = etag
            headers["Cache-Control"] = PRIVATE if private else PUBLIC
            headers.add_vary_header("Authorization")
            headers.add_vary_header("Cookie")
            if _names(request_headers.get("if-none-match", ""), etag):
                message["status"] = 304
                for name in ("content-length", "content-type"):
                    del headers[name]
                body = b""
            await send(message)
            await send({"type": "http.response.body", "body": body, "more_body": False})

        await self.app(scope, receive, hold)


def _names(if_none_match: str, etag: str) -> bool:
    return if_none_match.strip() == "*" or etag in (t.strip().removeprefix("W/") for t in if_none_match.split(","))
