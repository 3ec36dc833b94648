"""The FastAPI app factory."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

from fastapi import FastAPI
from fastapi.staticfiles import StaticFiles

from runcast import __version__
from runcast_server import migrate, pages
from runcast_server.api import api_router
from runcast_server.db import get_engine
from runcast_server.errors import install_error_handlers
from runcast_server.settings import Settings, get_settings

FRONTEND_DIR = Path(__file__).resolve().parents[2] / "frontend"


def prepare_database(settings: Settings) -> None:
    """The embedded default upgrades itself; a production database must already be at head."""
    if settings.embedded and settings.sqlalchemy_url.startswith("sqlite"):
        migrate.upgrade(settings.sqlalchemy_url)
    else:
        migrate.check_schema(get_engine())


def create_app(settings: Settings | None = None) -> FastAPI:
    """Build the API app: REST under /api/v1, /healthz, and the static frontend at /."""
    settings = settings or get_settings()

    @asynccontextmanager
    async def lifespan(_: FastAPI) -> AsyncIterator[None]:
        prepare_database(settings)
        yield

    app = FastAPI(title="Runcast", version=__version__, lifespan=lifespan)
    install_error_handlers(app)
    app.include_router(api_router)

    @app.get("/healthz", tags=["health"])
    def healthz() -> dict[str, str]:
        return {"status": "ok", "version": __version__, "mode": "embedded" if settings.embedded else "production"}

    app.include_router(pages.router)  # /runs/{id}, /compare, /vendor/plotly.min.js
    app.mount("/", StaticFiles(directory=FRONTEND_DIR, html=True), name="frontend")
    return app
