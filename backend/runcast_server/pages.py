"""Dashboard pages that need a route of their own (everything else is a static file).

* ``/runs/{id}`` serves ``frontend/run.html`` and ``/compare`` serves ``frontend/compare.html``;
  the page's script reads the run id and the view state from the URL.
* ``/vendor/plotly.min.js`` is the Plotly.js bundle that the ``plotly`` Python package
  ships, so the dashboard never reaches a CDN. It is gzip-compressed once in memory
  (about a third of the bytes on the wire) and revalidated by ETag.
"""

from __future__ import annotations

import gzip
import hashlib
import threading
from functools import lru_cache
from pathlib import Path

from fastapi import APIRouter, Request, Response
from fastapi.responses import FileResponse

from runcast_server.errors import NotFound

FRONTEND_DIR = Path(__file__).resolve().parents[2] / "frontend"

router = APIRouter(include_in_schema=False)

_HTML_HEADERS = {"Cache-Control": "no-cache"}
_lock = threading.Lock()


def plotly_path() -> Path:
    """The plotly.min.js inside the installed ``plotly`` package."""
    import plotly

    return Path(plotly.__file__).resolve().parent / "package_data" / "plotly.min.js"


@lru_cache(maxsize=1)
def _plotly_bundle() -> tuple[bytes, bytes, str]:
    """(raw, gzipped, etag) of the Plotly.js bundle, read and compressed once per process."""
    path = plotly_path()
    if not path.is_file():
        raise NotFound("plotly.min.js (install the plotly package)")
    raw = path.read_bytes()
    return raw, gzip.compress(raw, compresslevel=6, mtime=0), '"' + hashlib.sha256(raw).hexdigest()[:32] + '"'


def _page(name: str) -> FileResponse:
    return FileResponse(FRONTEND_DIR / name, media_type="text/html", headers=_HTML_HEADERS)


@router.get("/runs/{run_id}")
def run_page(run_id: str) -> FileResponse:
    """One run's live page; the script shows "run not found" when the API says so."""
    return _page("run.html")


@router.get("/compare")
def compare_page() -> FileResponse:
    return _page("compare.html")


@router.get("/vendor/plotly.min.js")
def plotly_js(request: Request) -> Response:
    with _lock:  # compress once even when the first viewers arrive together
        raw, packed, etag = _plotly_bundle()
    headers = {
        "ETag": etag,
        "Cache-Control": "public, max-age=86400",
        "Vary": "Accept-Encoding",
    }
    if etag in request.headers.get("if-none-match", ""):
        return Response(status_code=304, headers=headers)
    if "gzip" in request.headers.get("accept-encoding", ""):
        headers["Content-Encoding"] = "gzip"
        return Response(packed, media_type="text/javascript", headers=headers)
    return Response(raw, media_type="text/javascript", headers=headers)
