"""Static files over HTTP: strong ETags, gzip / brotli forms made once, and cache rules.

An :class:`Asset` is one file's bytes with its media type and a content hash. Its
compressed forms are made the first time a client asks for them and kept with it, so
every later viewer gets bytes compressed once. :func:`asset_response` answers a request
for an asset: ``304`` when the client's ``If-None-Match`` names it, the smallest encoding
the client accepts otherwise (brotli about 10 % smaller than gzip on the bundles), always
with ``Vary: Accept-Encoding``.

Only these static assets are compressed here. Checkpoint downloads (Range requests on
files of any size) never pass through this module.
"""

from __future__ import annotations

import gzip
import hashlib
import mimetypes
import threading
from dataclasses import dataclass, field
from pathlib import Path

import brotli
from fastapi import Request, Response

# A versioned address (the content's hash in its path or query) never changes meaning.
IMMUTABLE = "public, max-age=31536000, immutable"
# Pages and unversioned addresses are revalidated on every use: a 304 when unchanged.
REVALIDATE = "no-cache"

_COMPRESSIBLE = ("text/", "application/javascript", "application/json", "image/svg+xml")
_MIN_COMPRESS_BYTES = 1024
_GZIP_LEVEL = 9
_BROTLI_QUALITY = 9  # within 10 % of quality 11's size at a twentieth of its time (1 MB in 0.2 s)


def media_type_of(path: Path) -> str:
    if path.suffix in (".js", ".mjs"):
        return "text/javascript"
    return mimetypes.guess_type(path.name)[0] or "application/octet-stream"


@dataclass
class Asset:
    """One file's bytes, media type and sha256, with its compressed forms once made."""

    body: bytes
    media_type: str
    sha256: str
    _encoded: dict[str, bytes] = field(default_factory=dict, repr=False)
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    @classmethod
    def of(cls, body: bytes, media_type: str) -> Asset:
        return cls(body, media_type, hashlib.sha256(body).hexdigest())

    @property
    def compressible(self) -> bool:
        return len(self.body) >= _MIN_COMPRESS_BYTES and self.media_type.startswith(_COMPRESSIBLE)

    def etag(self, coding: str | None) -> str:
        """A strong validator per representation: the content hash, suffixed by the encoding."""
        return f'"{self.sha256[:32]}{"-" + coding if coding else ""}"'

    def encoded(self, coding: str | None) -> bytes:
        """The body in ``coding`` ("br", "gzip" or None), compressed on first use only."""
        if coding is None:
            return self.body
        with self._lock:  # viewers arriving together compress once
            if coding not in self._encoded:
                self._encoded[coding] = _compress(self.body, coding)
            return self._encoded[coding]


def _compress(body: bytes, coding: str) -> bytes:
    if coding == "br":
        return brotli.compress(body, quality=_BROTLI_QUALITY)
    return gzip.compress(body, compresslevel=_GZIP_LEVEL, mtime=0)


def accepted_codings(header: str) -> set[str]:
    """The content codings an ``Accept-Encoding`` header allows (q > 0), lower case."""
    allowed = set()
    for item in header.split(","):
        name, _, params = item.strip().partition(";")
        q = 1.0
        for param in params.split(";"):
            key, _, value = param.strip().partition("=")
            if key.strip().lower() == "q":
                try:
                    q = float(value)
                except ValueError:
                    q = 0.0
        if name and q > 0:
            allowed.add(name.strip().lower())
    return allowed


def choose_coding(asset: Asset, accept_encoding: str) -> str | None:
    if not asset.compressible:
        return None
    allowed = accepted_codings(accept_encoding)
    if "br" in allowed:
        return "br"
    if "gzip" in allowed or "*" in allowed:
        return "gzip"
    return None


def _matches(if_none_match: str, asset: Asset) -> bool:
    """Whether the client holds some representation of this content (any encoding)."""
    if if_none_match.strip() == "*":
        return True
    for tag in if_none_match.split(","):
        tag = tag.strip().removeprefix("W/").strip('"')
        if tag.split("-", 1)[0] == asset.sha256[:32]:
            return True
    return False


def asset_response(
    request: Request, asset: Asset, cache_control: str, extra_headers: dict[str, str] | None = None
) -> Response:
    """``asset`` for this request: 304, or its body in the best encoding the client accepts."""
    coding = choose_coding(asset, request.headers.get("accept-encoding", ""))
    headers = {"ETag": asset.etag(coding), "Cache-Control": cache_control, "Vary": "Accept-Encoding",
               **(extra_headers or {})}
    if _matches(request.headers.get("if-none-match", ""), asset):
        return Response(status_code=304, headers=headers)
    if coding:
        headers["Content-Encoding"] = coding
    return Response(asset.encoded(coding), media_type=asset.media_type, headers=headers)


class FileAssets:
    """The files under one directory as :class:`Asset` s, read once and again only when changed.

    A path that leaves the directory, names a hidden part or a directory is None.
    """

    def __init__(self, root: Path) -> None:
        self.root = root.resolve()
        self._cache: dict[Path, tuple[tuple[int, int], Asset]] = {}
        self._lock = threading.Lock()

    def resolve(self, rel: str) -> Path | None:
        parts = [p for p in rel.split("/") if p]
        if any(p.startswith(".") or "\\" in p or "\x00" in p for p in parts):
            return None
        path = self.root.joinpath(*parts).resolve()
        if path != self.root and self.root not in path.parents:
            return None
        return path

    def get(self, rel: str) -> Asset | None:
        path = self.resolve(rel)
        if path is None:
            return None
        try:
            st = path.stat()
        except OSError:
            return None
        if not path.is_file():
            return None
        stamp = (st.st_mtime_ns, st.st_size)
        with self._lock:
            cached = self._cache.get(path)
        if cached and cached[0] == stamp:
            return cached[1]
        asset = Asset.of(path.read_bytes(), media_type_of(path))
        with self._lock:
            self._cache[path] = (stamp, asset)
        return asset
