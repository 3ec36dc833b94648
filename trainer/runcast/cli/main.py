"""The ``runcast`` command line: one group, a verb per job."""

from __future__ import annotations

import typer

from runcast.cli import export as export_cmd

app = typer.Typer(
    name="runcast",
    help="Broadcast model-training runs live: serve the dashboard and API, ingest, sync, export.",
    no_args_is_help=True,
    add_completion=False,
)
db_app = typer.Typer(help="Manage the database schema.", no_args_is_help=True)
token_app = typer.Typer(help="Manage project ingest tokens and admin tokens.", no_args_is_help=True)
app.add_typer(db_app, name="db")
app.add_typer(token_app, name="token")
app.command("export")(export_cmd.export)


@db_app.command("upgrade")
def db_upgrade(revision: str = typer.Argument("head", help="Target revision.")) -> None:
    """Create or migrate the database schema to REVISION (default: the newest)."""
    from runcast_server import migrate
    from runcast_server.settings import get_settings

    url = get_settings().sqlalchemy_url
    migrate.upgrade(url, revision)
    typer.echo(f"database at {migrate.head_revision(url) if revision == 'head' else revision}")


@app.command()
def serve(
    host: str = typer.Option(None, help="Address to bind (default RUNCAST_HOST or 127.0.0.1)."),
    port: int = typer.Option(None, help="Port to listen on (default RUNCAST_PORT or 8000)."),
    workers: int = typer.Option(1, min=1, help="API processes (production mode only)."),
) -> None:
    """Run the API and dashboard. With no RUNCAST_REDIS_URL it runs embedded (SQLite, eager tasks)."""
    import copy

    import uvicorn
    from uvicorn.config import LOGGING_CONFIG

    from runcast_server.settings import get_settings

    settings = get_settings()
    if workers > 1 and settings.embedded:
        raise typer.BadParameter("--workers > 1 needs production mode (set RUNCAST_REDIS_URL)", param_hint="--workers")
    # The server's own messages (which Plotly.js bundle it serves, live resets) beside uvicorn's.
    log_config = copy.deepcopy(LOGGING_CONFIG)
    log_config["loggers"]["runcast_server"] = {"handlers": ["default"], "level": "INFO", "propagate": False}
    uvicorn.run(
        "runcast_server.app:create_app",
        factory=True,
        host=host or settings.host,
        port=port or settings.port,
        workers=workers,
        log_level="info",
        log_config=log_config,
        # Live streams never end by themselves: give them a few seconds, then stop.
        timeout_graceful_shutdown=5,
    )


# --- trainer side: reference trainer, replay of recorded runs, memory estimate ----------
from runcast.cli.train import train_command  # noqa: E402  (light: torch is imported on use)

app.command("train")(train_command)
from runcast.cli.replay import replay_command  # noqa: E402  (standard library and the SDK)

app.command("replay")(replay_command)
from runcast.cli.import_cmd import import_command  # noqa: E402  (readers import their tool on use)

app.command("import")(import_command)
from runcast.cli.estimate import estimate_command  # noqa: E402  (standard library only)

app.command("estimate")(estimate_command)


# --- artifacts: checkpoint downloads -------------------------------------------------------
from runcast.cli.download import download_command  # noqa: E402  (standard library, httpx; rich on use)

app.command("download")(download_command)


from runcast.cli.storage import storage_app  # noqa: E402  (server imported on use)

app.add_typer(storage_app, name="storage")


# --- SDK: replay spooled batches ----------------------------------------------------------
from runcast.cli.sync import sync_command  # noqa: E402  (light: standard library and httpx)

app.command("sync")(sync_command)


# --- write path: Celery worker, ingest tokens ---------------------------------------------
from runcast.cli.ingest_cmds import token_create_command, worker_command  # noqa: E402  (server imported on use)

app.command("worker")(worker_command)
token_app.command("create")(token_create_command)
from runcast.cli.quarantine import quarantine_app  # noqa: E402  (server imported on use)

app.add_typer(quarantine_app, name="quarantine")


# --- the one-command demo: embedded server + a real training run streaming to it ---------
from runcast.cli.demo import demo_command  # noqa: E402  (light: server and torch imported on use)

app.command("demo")(demo_command)


def main() -> None:
    app()


if __name__ == "__main__":
    main()
