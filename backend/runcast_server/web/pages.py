"""The dashboard's pages and files, and the API docs, all served from this server.

* ``/``, ``/runs/{id}``, ``/runs/{id}/reports/{n}`` and ``/compare`` are ``frontend/index.html``,
  ``run.html``, ``report.html`` and ``compare.html`` (the page's script reads the run id and the view from the URL); every
  other path is a file under ``frontend/`` (:class:`FrontendFiles`, mounted at ``/`` after
  every route, so a method the API does not serve at a path stays a 405). Pages are revalidated on every use
  (``Cache-Control: no-cache`` with a strong ETag: a 304 when unchanged); they link their
  scripts and styles by version (``frontend.py``), and a file asked for at its current
  version is cached as immutable (at any other address it is revalidated).
* ``/vendor/...``: Plotly.js, Swagger UI and ReDoc (``vendor.py``). The pages link the
  versioned address, which is cached as immutable.
* ``/docs`` (Swagger UI) and ``/redoc`` (ReDoc) load those local bundles: no page of
  Runcast asks another origin for anything (no CDN, web fonts, favicon or validator badge).

Text files go out gzip- or brotli-compressed when the client accepts it (``assets.py``).
"""

from __future__ import annotations

from fastapi import APIRouter, Request, Response
from fastapi.openapi.docs import get_redoc_html, get_swagger_ui_html
from starlette.concurrency import run_in_threadpool
from starlette.exceptions import HTTPException
from starlette.types import Receive, Scope, Send

from runcast_server.web.assets import IMMUTABLE, REVALIDATE, Asset, asset_response
from runcast_server.web.frontend import Frontend
from runcast_server.web.vendor import REDOC_JS, SWAGGER_CSS, SWAGGER_JS, Vendor

_GET = ["GET", "HEAD"]
# Swagger UI's defaults ask validator.swagger.io about the spec; Runcast asks nobody.
SWAGGER_UI_PARAMETERS = {"validatorUrl": None, "defaultModelsExpandDepth": 0}


def _not_found() -> HTTPException:
    return HTTPException(404, "Not Found")


# The dashboard's pages are framed only by themselves (clickjacking); /embed pages have their own policy.
PAGE_HEADERS = {
    "Content-Security-Policy": "frame-ancestors 'self'",
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "same-origin",
}


def page_response(request: Request, frontend: Frontend, name: str) -> Response:
    asset = frontend.page(name)
    if asset is None:
        raise _not_found()
    return asset_response(request, asset, REVALIDATE, PAGE_HEADERS)


def file_response(request: Request, frontend: Frontend, path: str) -> Response:
    """A page (``*.html``) or any other file of ``frontend/``; immutable when asked at its version."""
    if path.endswith(".html"):
        return page_response(request, frontend, path)
    asset = frontend.file(path)
    if asset is None:
        raise _not_found()
    current = request.query_params.get("v") == frontend.version(asset)
    return asset_response(request, asset, IMMUTABLE if current else REVALIDATE)


class FrontendFiles:
    """The files of ``frontend/`` as an ASGI app, to mount at ``/`` after every route."""

    def __init__(self, frontend: Frontend) -> None:
        self.frontend = frontend

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        request = Request(scope, receive)
        if request.method not in _GET:
            raise HTTPException(405, "Method Not Allowed")
        path = scope.get("path_params", {}).get("path", scope["path"].lstrip("/"))
        response = await run_in_threadpool(file_response, request, self.frontend, path)
        await response(scope, receive, send)


def pages_router(frontend: Frontend, vendor: Vendor, *, title: str, openapi_url: str) -> APIRouter:
    """The routes above but the files' (:class:`FrontendFiles`), over the state built at start."""
    router = APIRouter(include_in_schema=False)

    def page(request: Request, name: str) -> Response:
        return page_response(request, frontend, name)

    @router.api_route("/", methods=_GET)
    def index_page(request: Request) -> Response:
        return page(request, "index.html")

    @router.api_route("/runs/{run_id}", methods=_GET)
    def run_page(request: Request, run_id: str) -> Response:
        """One run's live page; the script shows "run not found" when the API says so."""
        return page(request, "run.html")

    @router.api_route("/runs/{run_id}/reports/{number}", methods=_GET)
    def report_page(request: Request, run_id: str, number: str) -> Response:
        """One training report (docs/reports.md); the script reads it and its blocks' data from the API."""
        return page(request, "report.html")

    @router.api_route("/compare", methods=_GET)
    def compare_page(request: Request) -> Response:
        return page(request, "compare.html")

    @router.api_route("/docs", methods=_GET)
    def swagger_ui(request: Request) -> Response:
        root = request.scope.get("root_path", "").rstrip("/")
        html = get_swagger_ui_html(
            openapi_url=root + openapi_url,
            title=f"{title} API",
            swagger_js_url=root + vendor.url(SWAGGER_JS),
            swagger_css_url=root + vendor.url(SWAGGER_CSS),
            swagger_favicon_url="data:,",
            swagger_ui_parameters=SWAGGER_UI_PARAMETERS,
        )
        return asset_response(request, Asset.of(bytes(html.body), "text/html"), REVALIDATE, PAGE_HEADERS)

    @router.api_route("/redoc", methods=_GET)
    def redoc(request: Request) -> Response:
        root = request.scope.get("root_path", "").rstrip("/")
        html = get_redoc_html(
            openapi_url=root + openapi_url,
            title=f"{title} API",
            redoc_js_url=root + vendor.url(REDOC_JS),
            redoc_favicon_url="data:,",
            with_google_fonts=False,
        )
        return asset_response(request, Asset.of(bytes(html.body), "text/html"), REVALIDATE, PAGE_HEADERS)

    @router.api_route("/vendor/{digest}/{name}", methods=_GET)
    def vendor_versioned(request: Request, digest: str, name: str) -> Response:
        bundle = vendor.get(name)
        if bundle is None:
            raise _not_found()
        # A page older than the server's bundle still gets a script, but not one to keep.
        return asset_response(request, bundle.asset, IMMUTABLE if digest == bundle.digest else REVALIDATE)

    @router.api_route("/vendor/{name}", methods=_GET)
    def vendor_latest(request: Request, name: str) -> Response:
        bundle = vendor.get(name)
        if bundle is None:
            raise _not_found()
        return asset_response(request, bundle.asset, REVALIDATE)

    return router
