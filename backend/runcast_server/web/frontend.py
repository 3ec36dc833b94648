"""The files of ``frontend/`` as served: pages whose links name each file's version.

A page (``*.html``) is sent with its links to local scripts and styles (``src="/js/run.js"``,
``href="/style.css"``) rewritten to ``/js/run.js?v=<sha256 prefix>`` and its links to
vendored bundles to their versioned address (``vendor.py``), and with an import map that
sends every module import (``import ... from "./chart.js"``) to the versioned address too.
A request whose ``v`` is the file's current version may then be cached as immutable: a
reload revalidates the page alone, and only a changed file is fetched again. The files
stay plain ES modules on disk with no build step; an edit shows on the next page load.

Bundled: ``vendor/build.mjs`` (esbuild) builds a page's modules into one file
(``frontend/dist/run.js``), committed with the modules and rebuilt by ``scripts/install`` and the
Docker image. The page's module script points at that bundle instead, as long as
``frontend/dist/manifest.json`` says it was built from exactly the files now on disk (each
source's sha256, and the bundle's). A first load then asks for one module. An edited module
not yet rebuilt, a missing or partial build or an unreadable manifest: the plain modules, as below.

Unbundled, each module script of a page is preceded by a ``<link rel="modulepreload">`` for
every module it imports, directly or not (the static ``import``/``export ... from`` graph, read
from the files): a first load asks for the whole graph at once instead of discovering it one
level of imports after another.

Every page also gets the versioned address of each language's catalog (``i18n/<code>.json``) in a
``<script type="application/json" id="runcast-catalogs">`` before ``</head>``: the same bytes for
every language, and the catalog is cached as immutable like the scripts (``js/i18n.js``).
"""

from __future__ import annotations

import json
import logging
import posixpath
import re
import threading

from runcast_server.web.assets import Asset, FileAssets
from runcast_server.web.vendor import Vendor

log = logging.getLogger(__name__)

_VERSION_CHARS = 16
BUNDLE_MANIFEST = "dist/manifest.json"
# run.html's choice of how anonymous viewers follow a run (RUNCAST_PUBLIC_FOLLOW).
_FOLLOW_META = re.compile(rb'(<meta name="runcast-follow" content=")[a-z]*"')
_LOCAL_LINK = re.compile(rb'(src|href)="/([^"?#]+\.(?:js|css))"')
_FIRST_MODULE = re.compile(rb'<link rel="modulepreload" href="/js/|<script type="module" src="/js/')
_MODULE_SCRIPT = re.compile(rb'<script type="module" src="/(js/[^"?#]+\.js)"></script>')
_PRELOAD = re.compile(rb'<link rel="modulepreload" href="/(js/[^"?#]+\.js)">')
# Static imports and re-exports of a relative module: `import {a} from "./x.js"`, `export * from "../y.js"`.
_IMPORT = re.compile(r'^\s*(?:import|export)\b[^;"\']*?\bfrom\s*["\'](\.{1,2}/[^"\']+\.js)["\']|^\s*import\s*["\'](\.{1,2}/[^"\']+\.js)["\']', re.MULTILINE)


class Frontend:
    """Pages with versioned links over the files of one directory."""

    def __init__(self, files: FileAssets, vendor: Vendor, *, bundles: bool = True, follow: str = "stream") -> None:
        self.files = files
        self.follow = follow
        self.bundles = bundles
        self.vendor = vendor
        self._pages: dict[str, Asset] = {}
        self._lock = threading.Lock()
        self._stale_logged: set[tuple[str, str]] = set()

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
        html = _FOLLOW_META.sub(b'\\1' + self.follow.encode() + b'"', html)
        html = self._with_bundles(html)
        html = self._with_module_preloads(html)
        html = _LOCAL_LINK.sub(self._versioned_link, html)
        html = self._with_import_map(html)
        html = self._with_catalogs(html)
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

    def bundle(self, entry: str) -> str | None:
        """The bundle built from ``entry`` (``js/run.js`` -> ``dist/run.js``) if it is up to date, else None."""
        manifest = self.files.get(BUNDLE_MANIFEST) if self.bundles else None
        if manifest is None:
            return None
        try:
            built = json.loads(manifest.body)["bundles"][entry]
            file, inputs = str(built["file"]), dict(built["inputs"])
            current = self.files.get(file)
            stale = [] if current is not None and current.sha256 == built["sha256"] else [file]
        except (ValueError, KeyError, TypeError):
            return None
        for rel, digest in inputs.items():
            asset = self.files.get(rel)
            if asset is None or asset.sha256 != digest:
                stale.append(rel)
        if stale:
            key = (entry, manifest.sha256)
            if key not in self._stale_logged:
                self._stale_logged.add(key)
                log.warning(
                    "%s: the bundle %s is older than %s: serving the plain modules (run scripts/install or "
                    "node vendor/build.mjs to rebuild it)", entry, file, ", ".join(stale[:3]),
                )
            return None
        return file

    def _with_bundles(self, html: bytes) -> bytes:
        """Each module script pointed at its page bundle, where one is built and up to date."""

        def bundled(match: re.Match[bytes]) -> bytes:
            file = self.bundle(match.group(1).decode())
            return match.group(0) if file is None else b'<script type="module" src="/%s"></script>' % file.encode()

        return _MODULE_SCRIPT.sub(bundled, html)

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

    def _with_catalogs(self, html: bytes) -> bytes:
        end = html.find(b"</head>")
        if end < 0:
            return html
        urls = {}
        for path in sorted(self.files.root.glob("i18n/*.json")):
            rel = path.relative_to(self.files.root).as_posix()
            asset = self.files.get(rel)
            if asset is not None:
                urls[path.stem] = f"/{rel}?v={self.version(asset)}"
        if not urls:
            return html
        # json.dumps escapes no "<": a name with "</script>" cannot come from a file name we wrote,
        # but keep the tag closed whatever the file names are.
        body = json.dumps(urls).replace("<", "\\u003c").encode()
        tag = b'<script type="application/json" id="runcast-catalogs">' + body + b"</script>\n"
        return html[:end] + tag + html[end:]

