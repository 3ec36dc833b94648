"""``runcast serve`` and ``runcast db upgrade``: run the API, make the schema."""

from __future__ import annotations

from typing import Any

import typer


def db_upgrade_command(revision: str = typer.Argument("head", help="Target revision.")) -> None:
    """Create or migrate the database schema to REVISION (default: the newest)."""
    from runcast_server.core import migrate
    from runcast_server.core.settings import Settings

    url = Settings().sqlalchemy_url
    migrate.upgrade(url, revision)
    typer.echo(f"database at {migrate.head_revision(url) if revision == 'head' else revision}")


def serve_command(
    host: str = typer.Option(None, help="Address to bind (default RUNCAST_HOST or 127.0.0.1)."),
    port: int = typer.Option(None, help="Port to listen on (default RUNCAST_PORT or 8000)."),
    workers: int = typer.Option(1, min=1, help="API processes (production mode only)."),
) -> None:
    """Run the API and dashboard. With no RUNCAST_REDIS_URL it runs embedded (SQLite, eager tasks)."""
    import copy

    import uvicorn
    from uvicorn.config import LOGGING_CONFIG

    from runcast_server.core.settings import Settings
    from runcast_server.observability.logs import uvicorn_log_config

    settings = Settings()
    if workers > 1 and settings.embedded:
        raise typer.BadParameter("--workers > 1 needs production mode (set RUNCAST_REDIS_URL)", param_hint="--workers")
    # The server's own messages (which Plotly.js bundle it serves, live resets) beside uvicorn's.
    log_config = copy.deepcopy(LOGGING_CONFIG)
    log_config["loggers"]["runcast_server"] = {"handlers": ["default"], "level": "INFO", "propagate": False}
    log_config = uvicorn_log_config(log_config, settings.log_format)
    # One process: the app of these settings. Several: each worker process builds its app, and reads
    # its settings, once (create_app's default).
    app: Any = "runcast_server.app:served_app"
    if workers == 1:
        from runcast_server.app import served_app

        app = served_app(settings)
    uvicorn.run(
        app,
        factory=workers > 1,
        host=host or settings.host,
        port=port or settings.port,
        workers=workers,
        log_level="info",
        log_config=log_config,
        # Live streams never end by themselves: give them a few seconds, then stop.
        timeout_graceful_shutdown=5,
    )
