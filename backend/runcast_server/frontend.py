"""The files of ``frontend/`` as served: pages whose links name each file's version.

A page (``*.html``) is sent with its links to local scripts and styles (``src="/js/run.js"``,
``href="/style.css"``) rewritten to ``/js/run.js?v=<sha256 prefix>`` and its links to
vendored bundles to their versioned address (``vendor.py``), and with an import map that
sends every module import (``import ... from "./chart.js"``) to the versioned address too.
A request whose ``v`` is the file's current version may then be cached as immutable: a
reload revalidates the page alone, and only a changed file is fetched again. The files
stay plain ES modules on disk with no build step; an edit shows on the next page load.

Each module script of a page is preceded by a ``<link rel="modulepreload">`` for every module
it imports, directly or not (the static ``import``/``export ... from`` graph, read from the
files): a first load asks for the whole graph at once instead of discovering it one level of
imports after another.
"""

from __future__ import annotations

import json
import posixpath
import re
import threading

from runcast_server.assets import Asset, FileAssets
from runcast_server.vendor import Vendor

_VERSION_CHARS = 16
_LOCAL_LINK = re.compile(rb'(src|href)="/([^"?#]+\.(?:js|css))"')
_FIRST_MODULE = re.compile(rb'<link rel="modulepreload"|<script type="module"')
_MODULE_SCRIPT = re.compile(rb'<script type="module" src="/(js/[^"?#]+\.js)"></script>')
_PRELOAD = re.compile(rb'<link rel="modulepreload" href="/(js/[^"?#]+\.js)">')
# Static imports and re-exports of a relative module: `import {a} from "./x.js"`, `export * from "../y.js"`.
_IMPORT = re.compile(r'^\s*(?:import|export)\b[^;"\']*?\bfrom\s*["\'](\.{1,2}/[^"\']+\.js)["\']|^\s*import\s*["\'](\.{1,2}/[^"\']+\.js)["\']', re.MULTILINE)


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
        html = self._with_module_preloads(html)
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

    def module_graph(self, entry: str) -> list[str]:
        """``entry`` (``js/run.js``) and every module it imports, directly or not, in the order found."""
        seen: list[str] = []
        todo = [entry]
        while todo:
            rel = todo.pop(0)
            if rel in seen:
                continue
            asset = self.files.get(rel)
            if asset is None:
                continue
            seen.append(rel)
            base = posixpath.dirname(rel)
            for match in _IMPORT.finditer(asset.body.decode("utf-8", "replace")):
                target = posixpath.normpath(posixpath.join(base, match.group(1) or match.group(2)))
                if target not in seen:
                    todo.append(target)
        return seen

    def _with_module_preloads(self, html: bytes) -> bytes:
        """A modulepreload link before each module script for each module of its graph not yet linked."""
        linked = {m.group(1).decode() for m in _PRELOAD.finditer(html)}

        def preloads(match: re.Match[bytes]) -> bytes:
            links = []
            for rel in self.module_graph(match.group(1).decode()):
                if rel not in linked:
                    linked.add(rel)
                    links.append(b'<link rel="modulepreload" href="/%s" fetchpriority="low">\n  ' % rel.encode())
            return b"".join(links) + match.group(0)

        return _MODULE_SCRIPT.sub(preloads, html)

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
