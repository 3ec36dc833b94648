"""The FastAPI app factory."""

from __future__ import annotations

import logging
import os
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from secrets import token_urlsafe
from typing import Any

from fastapi import FastAPI
from fastapi.responses import JSONResponse
from runcast import __version__
from sqlalchemy import Engine
from starlette.middleware.sessions import SessionMiddleware

from runcast_server.api import api_router
from runcast_server.api.limits import BodyLimit, body_limit
from runcast_server.api.openapi import openapi_document, operation_id
from runcast_server.api.routes.share import share_router
from runcast_server.api.routes.stream import ServerSend
from runcast_server.api.shared_cache import SharedRunReads
from runcast_server.artifacts.s3 import parse_storage_url
from runcast_server.context import AppContext
from runcast_server.core import migrate
from runcast_server.core.errors import error_responses, install_error_handlers
from runcast_server.core.gc_policy import tune_for_serving
from runcast_server.core.settings import Settings
from runcast_server.core.shipped import frontend_dir
from runcast_server.health import Liveness, Probes, Readiness, probes
from runcast_server.inbox.gauges import InboxCollector
from runcast_server.inbox.sweep import SweepTimer
from runcast_server.metrics.export import warm_up as warm_exports
from runcast_server.observability.http import (
    RequestMetrics,
    exposition,
    scrape_registry,
)
from runcast_server.observability.prometheus import Metrics, multiprocess_dir
from runcast_server.people.oidc import registry
from runcast_server.sessions.http import PrivateWhenSignedIn
from runcast_server.share.cors import PublicReadCors
from runcast_server.tasks import enqueue_ingest
from runcast_server.web.assets import FileAssets
from runcast_server.web.frontend import Frontend
from runcast_server.web.pages import FrontendFiles, pages_router
from runcast_server.web.vendor import load_vendor

log = logging.getLogger(__name__)

FRONTEND_DIR = frontend_dir()
INGEST_PATH = "/api/v1/ingest"


def prepare_database(settings: Settings, engine: Engine) -> None:
    """The embedded default upgrades itself; a production database must already be at head."""
    if settings.embedded and settings.sqlalchemy_url.startswith("sqlite"):
        migrate.upgrade(settings.sqlalchemy_url)
    else:
        migrate.check_schema(engine)


def served_app(settings: Settings | None = None) -> FastAPI:
    """The app as ``runcast serve`` runs it in each API process: ``create_app`` with the
    server's garbage-collector policy (``core.gc_policy``)."""
    app = create_app(settings)
    tune_for_serving()
    return app


def create_app(settings: Settings | None = None) -> FastAPI:
    """Build the API app: REST under /api/v1, /healthz, /readyz, /metrics, and the static frontend at /.

    ``settings``: the app's; None reads them from the environment (``Settings()``), here, once.
    """
    settings = settings if settings is not None else Settings()
    if settings.storage_url:  # refused at startup, not on the first download
        parse_storage_url(settings.storage_url)
    metrics = Metrics()
    ctx = AppContext.build(settings, metrics=metrics)  # this app's state; its threads start with the lifespan
    checks: Probes | None = None
    vendor = load_vendor(settings.vendor_dir)

    @asynccontextmanager
    async def lifespan(_: FastAPI) -> AsyncIterator[None]:
        nonlocal checks
        prepare_database(settings, ctx.database.engine)
        checks = probes(ctx.database.engine, settings)
        if vendor.plotly_partial:
            log.info(vendor.describe())
        else:  # a slower first page load: worth a line in every server log
            log.warning(vendor.describe())
        ctx.start()  # embedded: the alert check (stalls, quiet restart loops, delivery pruning)
        warm_exports()
        # Embedded, this process also sweeps the ingest inbox (production: Celery beat).
        timer = SweepTimer(ctx.database, settings, lambda inbox_id: enqueue_ingest(ctx, inbox_id)).start() if settings.embedded else None
        try:
            yield
        finally:
            if timer is not None:
                timer.stop()
            ctx.close()
            if multiprocess_dir() is not None:  # this process's live gauges (viewers) leave the sum
                from prometheus_client import multiprocess

                multiprocess.mark_process_dead(os.getpid())

    # /docs and /redoc are web.pages': the same UIs from local bundles instead of a CDN.
    app = FastAPI(title="Runcast", version=__version__, lifespan=lifespan, docs_url=None, redoc_url=None,
                  generate_unique_id_function=operation_id)
    app.state.metrics = metrics
    app.state.context = ctx  # routes: api.deps.ContextDep
    install_error_handlers(app)
    app.add_middleware(
        BodyLimit,
        limit_for=lambda path: body_limit(settings, path),
    )
    app.add_middleware(RequestMetrics, metrics=metrics, ingest_path=INGEST_PATH)
    app.add_middleware(SharedRunReads)  # a run's first reads, cacheable when anonymous (docs/live.md)
    app.add_middleware(PrivateWhenSignedIn)  # docs/auth.md: caching
    app.state.oauth = registry(settings.oidc_providers) if settings.oidc_providers else None
    if settings.oidc_providers:  # Authlib's state, nonce and PKCE verifier between login and callback
        secret = settings.oidc_state_secret.get_secret_value() if settings.oidc_state_secret else token_urlsafe(32)
        app.add_middleware(SessionMiddleware, secret_key=secret, session_cookie="runcast_oidc", max_age=600,
                           path="/api/v1/session/oidc", same_site="lax", https_only=False)
    if settings.cors_origins:  # a preflight is answered before any other middleware acts (docs/sharing.md)
        app.add_middleware(PublicReadCors, origins=settings.cors_origins)
    app.add_middleware(ServerSend)  # outside the others: live streams write their bodies past them
    app.include_router(api_router)
    scrape = scrape_registry(metrics, [InboxCollector(lambda: ctx.database.engine)])
    app.add_api_route("/metrics", exposition(scrape, settings.metrics_token), methods=["GET"],
                      include_in_schema=False, tags=["health"])

    @app.get("/healthz", tags=["health"], response_model=Liveness)
    def healthz() -> Liveness:
        """Liveness: the process answers (no dependency is touched; see /readyz)."""
        return Liveness(status="ok", version=__version__, mode="embedded" if settings.embedded else "production")

    @app.get("/readyz", tags=["health"], response_model=Readiness,
             responses={503: {"model": Readiness, "description": "A check failed: the database cannot be reached "
                              "or written, the disk is below RUNCAST_MIN_FREE_BYTES, or Redis cannot be reached."}})
    def readyz() -> Any:
        """Readiness: ingest can store now (the database is writable, the embedded database's disk has room,
        Redis answers in production); 503 with Retry-After when not."""
        report = (checks or probes(ctx.database.engine, settings)).readiness()
        if report.status == "ready":
            return report
        return JSONResponse(report.model_dump(), status_code=503, headers={"Retry-After": "5"})

    frontend = Frontend(FileAssets(FRONTEND_DIR), vendor, bundles=settings.page_bundles,
                        follow=settings.public_follow)
    app.state.vendor, app.state.frontend = vendor, frontend  # a report's static export inlines their files
    app.include_router(share_router(frontend, settings), responses=error_responses(413, 503))
    app.include_router(pages_router(frontend, vendor, title=app.title, openapi_url=app.openapi_url or "/openapi.json"))
    app.mount("/", FrontendFiles(frontend), name="frontend")  # last: whatever no route matched
    app.openapi = lambda: openapi_document(app)  # type: ignore[method-assign]  # FastAPI's documented hook
    return app

