"""The third-party browser bundles Runcast serves itself: Plotly.js, Swagger UI and ReDoc.

* Plotly.js: the partial bundle ``plotly.js-basic-dist-min`` (scatter, bar and pie: every
  chart type the pages draw; 1.2 MB instead of 4.8 MB, so a first load compiles a quarter
  of the code) when ``scripts/install`` put it under ``vendor_dir`` with npm. Without it
  (an install without npm, a wheel built without it) the full bundle that the ``plotly`` Python package ships.
* Swagger UI and ReDoc for ``/docs`` and ``/redoc``: the bundles the ``fastapi-offline``
  package ships. ReDoc's side menu shows a logo it loads from its maker's CDN (no option
  turns it off): that address is replaced by an empty ``data:`` image, which ReDoc hides.

Each bundle is served at ``/vendor/<sha256 prefix>/<name>`` with immutable caching (the
pages link there) and at ``/vendor/<name>`` with revalidation. Files are read when first
asked for, so building the app stays cheap.
"""

from __future__ import annotations

import json
import logging
import threading
from dataclasses import dataclass, field
from importlib.resources import files
from pathlib import Path

from runcast_server.web.assets import Asset, media_type_of

log = logging.getLogger(__name__)

PLOTLY_NPM_PACKAGE = "plotly.js-basic-dist-min"
PLOTLY_NPM_FILE = "plotly-basic.min.js"
PLOTLY = "plotly.min.js"
SWAGGER_JS = "swagger-ui-bundle.js"
SWAGGER_CSS = "swagger-ui.css"
REDOC_JS = "redoc.standalone.js"
_DIGEST_CHARS = 16
REDOC_CDN_LOGO = b"https://cdn.redoc.ly/redoc/logo-mini.svg"


@dataclass
class Bundle:
    """One vendored file: where it comes from, and its bytes once read."""

    name: str
    path: Path
    origin: str
    replace: tuple[tuple[bytes, bytes], ...] = ()
    _asset: Asset | None = field(default=None, repr=False)
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    @property
    def asset(self) -> Asset:
        with self._lock:
            if self._asset is None:
                body = self.path.read_bytes()
                for old, new in self.replace:
                    body = body.replace(old, new)
                self._asset = Asset.of(body, media_type_of(self.path))
            return self._asset

    @property
    def digest(self) -> str:
        return self.asset.sha256[:_DIGEST_CHARS]

    @property
    def url(self) -> str:
        """The versioned address: its content never changes."""
        return f"/vendor/{self.digest}/{self.name}"


class Vendor:
    """The bundles by name, and which Plotly.js build was found."""

    def __init__(self, bundles: list[Bundle], plotly_partial: bool, vendor_dir: Path) -> None:
        self.bundles = {b.name: b for b in bundles}
        self.plotly_partial = plotly_partial
        self.vendor_dir = vendor_dir

    def get(self, name: str) -> Bundle | None:
        return self.bundles.get(name)

    def url(self, name: str) -> str:
        return self.bundles[name].url

    def link_versions(self, html: bytes) -> bytes:
        """A page's links to ``/vendor/<name>`` pointed at the versioned addresses."""
        for bundle in self.bundles.values():
            stable = f'"/vendor/{bundle.name}"'.encode()
            if stable in html:
                html = html.replace(stable, f'"{bundle.url}"'.encode())
        return html

    def describe(self) -> str:
        """One line for the server's log: which Plotly.js the pages get, and how to change it."""
        plotly = self.bundles[PLOTLY]
        size = plotly.path.stat().st_size / 1e6
        if self.plotly_partial:
            return f"Plotly.js: {plotly.origin}, {size:.1f} MB"
        return (
            f"Plotly.js: the full bundle of the plotly Python package ({size:.1f} MB, slower first page load); "
            f"the partial bundle {PLOTLY_NPM_PACKAGE} is not installed in {self.vendor_dir}: "
            "run scripts/install with npm present (docs/deployment.md)"
        )


def plotly_package_bundle() -> Path:
    """The full plotly.min.js inside the installed ``plotly`` Python package."""
    return Path(str(files("plotly") / "package_data" / "plotly.min.js"))


def _npm_version(package_dir: Path) -> str:
    try:
        return str(json.loads((package_dir / "package.json").read_text())["version"])
    except (OSError, ValueError, KeyError):
        return "?"


def load_vendor(vendor_dir: Path) -> Vendor:
    """Find the bundles: the npm Plotly.js partial bundle under ``vendor_dir`` if installed."""
    package_dir = vendor_dir / PLOTLY_NPM_PACKAGE
    partial = package_dir / PLOTLY_NPM_FILE
    if partial.is_file():
        plotly = Bundle(PLOTLY, partial, f"the partial bundle {PLOTLY_NPM_PACKAGE} {_npm_version(package_dir)} from {package_dir}")
    else:
        plotly = Bundle(PLOTLY, plotly_package_bundle(), "the plotly Python package")
    docs = Path(str(files("fastapi_offline") / "static"))
    bundles = [
        plotly,
        Bundle(SWAGGER_JS, docs / SWAGGER_JS, "fastapi-offline"),
        Bundle(SWAGGER_CSS, docs / SWAGGER_CSS, "fastapi-offline"),
        Bundle(REDOC_JS, docs / REDOC_JS, "fastapi-offline", replace=((REDOC_CDN_LOGO, b"data:,"),)),
    ]
    return Vendor(bundles, plotly_partial=partial.is_file(), vendor_dir=vendor_dir)
