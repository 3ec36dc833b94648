"""Responses of the share routes: a strong ETag on the body, a 304 for a client that holds it,
and a short cache life so that a badge or figure follows the run."""

from __future__ import annotations

import hashlib

from fastapi import Request, Response

# Badges and figures change as the run goes on: caches (a README's image proxy) keep them briefly.
SHORT_CACHE = "public, max-age=15, must-revalidate"
# What a project token showed is for that caller alone.
PRIVATE_CACHE = "private, no-cache"
# An image opened on its own is a document: it may run nothing and load nothing.
IMAGE_HEADERS = {
    "Content-Security-Policy": "default-src 'none'; style-src 'unsafe-inline'; sandbox",
    "X-Content-Type-Options": "nosniff",
}


def etag_of(body: bytes) -> str:
    return '"' + hashlib.sha256(body).hexdigest()[:32] + '"'


def fresh(request: Request, etag: str) -> bool:
    """Whether the request's If-None-Match names ``etag`` (weak or strong)."""
    header = request.headers.get("if-none-match", "")
    return header.strip() == "*" or etag in (t.strip().removeprefix("W/") for t in header.split(","))


def cache_headers(etag: str, *, shared: bool) -> dict[str, str]:
    """``shared``: caches may keep the answer (no token was needed to see it)."""
    return {"ETag": etag, "Cache-Control": SHORT_CACHE if shared else PRIVATE_CACHE, **IMAGE_HEADERS}


def not_modified(headers: dict[str, str]) -> Response:
    return Response(status_code=304, headers=headers)


def cached_response(request: Request, body: bytes, media_type: str, *, shared: bool,
                    etag: str | None = None, headers: dict[str, str] | None = None) -> Response:
    """An image ``body`` with its ETag (the body's hash unless given; a 304 when the client holds it)."""
    out = {**cache_headers(etag or etag_of(body), shared=shared), **(headers or {})}
    if fresh(request, out["ETag"]):
        return not_modified(out)
    return Response(body, media_type=media_type, headers=out)
