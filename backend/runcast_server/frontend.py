"""The files of ``frontend/`` as served: pages whose links name each file's version.

A page (``*.html``) is sent with its links to local scripts and styles (``src="/js/run.js"``,
``href="/style.css"``) rewritten to ``/js/run.js?v=<sha256 prefix>`` and its links to
vendored bundles to their versioned address (``vendor.py``), and with an import map that
sends every module import (``import ... from "./chart.js"``) to the versioned address too.
A request whose ``v`` is the file's current version may then be cached as immutable: a
reload revalidates the page alone, and only a changed file is fetched again. The files
stay plain ES modules on disk with no build step; an edit shows on the next page load.
"""

from __future__ import annotations

import json
import re
import threading

from runcast_server.assets import Asset, FileAssets
from runcast_server.vendor import Vendor

_VERSION_CHARS = 16
_LOCAL_LINK = re.compile(rb'(src|href)="/([^"?#]+\.(?:js|css))"')
_FIRST_MODULE = re.compile(rb'<link rel="modulepreload"|<script type="module"')


class Frontend:
    """Pages with versioned links over the files of one directory."""

    def __init__(self, files: FileAssets, vendor: Vendor) -> None:
        self.files = files
        self.vendor = vendor
        self._pages: dict[str, Asset] = {}
        self._lock = threading.Lock()

    def file(self, rel: str) -> Asset | None:
        return self.files.get(rel)

    def version(self, asset: Asset) -> str:
        return asset.sha256[:_VERSION_CHARS]

    def page(self, name: str) -> Asset | None:
        """The page ``name`` with its links versioned (same bytes, same Asset, while nothing changed)."""
        source = self.files.get(name)
        if source is None:
            return None
        html = self.vendor.link_versions(source.body)
        html = _LOCAL_LINK.sub(self._versioned_link, html)
        html = self._with_import_map(html)
        with self._lock:
            cached = self._pages.get(name)
            if cached is None or cached.body != html:
                cached = self._pages[name] = Asset.of(html, source.media_type)
            return cached

    def _versioned_link(self, match: re.Match[bytes]) -> bytes:
        rel = match.group(2).decode()
        asset = self.files.get(rel)
        if asset is None:
            return match.group(0)
        return b'%s="/%s?v=%s"' % (match.group(1), rel.encode(), self.version(asset).encode())

    def _with_import_map(self, html: bytes) -> bytes:
        first = _FIRST_MODULE.search(html)
        if first is None:
            return html
        imports = {}
        for path in sorted(self.files.root.glob("js/**/*.js")):
            rel = path.relative_to(self.files.root).as_posix()
            asset = self.files.get(rel)
            if asset is not None:
                imports[f"/{rel}"] = f"/{rel}?v={self.version(asset)}"
        tag = b'<script type="importmap">' + json.dumps({"imports": imports}).encode() + b"</script>\n  "
        return html[: first.start()] + tag + html[first.start() :]
