"""``runcast worker`` and ``runcast token create``: the write path's commands (and the database
opening every server verb shares).

The server package is imported inside each command, so ``runcast`` stays cheap
to start in a training job that only needs the SDK. Each command reads the settings
from the environment once (``Settings()``) and passes them on.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from enum import Enum
from typing import TYPE_CHECKING

import typer

if TYPE_CHECKING:
    from sqlalchemy import Engine

    from runcast_server.core.db import Database
    from runcast_server.core.settings import Settings


class Pool(str, Enum):
    prefork = "prefork"
    solo = "solo"
    threads = "threads"


def worker_command(
    concurrency: int = typer.Option(None, "--concurrency", "-c", min=1, help="Worker processes/threads (default: CPU count)."),
    pool: Pool = typer.Option(Pool.prefork, help="Celery execution pool."),  # noqa: B008 - typer declares options as defaults
    loglevel: str = typer.Option("INFO", help="DEBUG, INFO, WARNING, ERROR."),
    beat: bool = typer.Option(
        False, "--beat", "-B",
        help="Also run Celery beat (the stall check and the ingest inbox sweeper) inside this worker. For single-worker "
        "deployments: exactly one process of the deployment may run beat.",
    ),
    schedule: str = typer.Option(
        None, "--schedule", "-s",
        help="Beat's schedule state file (with --beat; default: celerybeat-schedule in RUNCAST_DATA_DIR).",
    ),
) -> None:
    """Run a Celery worker for ingest and alert tasks (production mode: needs RUNCAST_REDIS_URL)."""
    from runcast_server.core.celery_app import RuncastCelery
    from runcast_server.core.settings import Settings

    settings = Settings()
    if settings.embedded:
        typer.echo(
            "runcast worker needs a broker: set RUNCAST_REDIS_URL (e.g. redis://localhost:6379/0). "
            "Without it, `runcast serve` runs ingest tasks itself.",
            err=True,
        )
        raise typer.Exit(2)
    if schedule and not beat:
        raise typer.BadParameter("--schedule is for --beat", param_hint="--schedule")
    argv = ["worker", f"--pool={pool.value}", f"--loglevel={loglevel}"]
    if concurrency:
        argv.append(f"--concurrency={concurrency}")
    if beat:
        # Celery's embedded beat (`celery worker -B`): one scheduler in this worker. A second
        # one anywhere (another `--beat` worker, a `celery beat` service) would run every
        # periodic task twice as often; the sweep's Redis lock only makes overlaps skip.
        if not schedule:
            settings.data_dir.mkdir(parents=True, exist_ok=True)
            schedule = str(settings.data_dir / "celerybeat-schedule")
        argv += ["--beat", f"--schedule={schedule}"]
    RuncastCelery(settings).worker_main(argv)  # the worker's context is built from them (tasks._worker_start)


def token_create_command(
    project: str = typer.Option(None, "--project", "-p", help="Project name (created if missing)."),
    admin: bool = typer.Option(False, "--admin", help="An admin token (the /api/v1/admin routes) instead of a project's."),
    label: str = typer.Option(None, "--label", help="A note to tell tokens apart."),
    scope: list[str] = typer.Option(  # noqa: B008 - typer declares options as defaults
        None, "--scope",
        help="What the token may do: read, ingest, team (repeat the flag or give a comma list; default: all three). "
        "A trainer needs ingest; a dashboard sign-in read; managing runs, policies and tokens team.",
    ),
) -> None:
    """Create a token for PROJECT (or, with --admin, an admin token) and print it once.

    Only its hash is stored, in the database of the current settings (RUNCAST_DATABASE_URL,
    else RUNCAST_DATA_DIR's SQLite: the one `runcast serve` and `runcast demo` use); which one
    is said on stderr.
    """
    from runcast.wire.events import PROJECT_RE

    from runcast_server.core.auth import SCOPES, BadScope, create_admin_token, create_token, parse_scopes
    from runcast_server.core.settings import Settings

    if admin == (project is not None):
        raise typer.BadParameter("give either --project P or --admin", param_hint="--project")
    if admin and scope:
        raise typer.BadParameter("an admin token has no scopes", param_hint="--scope")
    try:
        scopes = parse_scopes(scope) if scope else SCOPES
    except BadScope as exc:
        raise typer.BadParameter(str(exc), param_hint="--scope") from exc
    if project is not None and not PROJECT_RE.match(project):
        raise typer.BadParameter("1-100 characters of A-Z, a-z, 0-9, '.', '_' or '-'", param_hint="--project")
    settings = Settings()
    with open_database(settings) as db, db.scope() as session:
        token = create_admin_token(session, label) if admin else create_token(session, project, label, scopes)
    typer.echo(token)
    typer.echo(f"(stored in {_database_label(settings)}: a server using that database accepts it)", err=True)


def _database_label(settings: Settings) -> str:
    """The settings' database, without a password."""
    from sqlalchemy.engine import make_url

    return make_url(settings.sqlalchemy_url).render_as_string(hide_password=True)


@contextmanager
def open_database(settings: Settings) -> Iterator[Database]:
    """The settings' database for one command, its schema made or checked (``ensure_schema``); closed after."""
    from runcast_server.core.db import Database

    db = Database.open(settings.sqlalchemy_url)
    try:
        ensure_schema(settings, db.engine)
        yield db
    finally:
        db.engine.dispose()


def ensure_schema(settings: Settings, engine: Engine) -> None:
    """Embedded: create or upgrade the database. Otherwise: exit 1 unless it is at the newest revision."""
    from runcast_server.core import migrate

    if settings.sqlalchemy_url.startswith("sqlite"):
        migrate.upgrade(settings.sqlalchemy_url)  # the embedded database manages itself
        return
    try:
        migrate.check_schema(engine)
    except migrate.SchemaOutOfDate as exc:
        typer.echo(f"error: {exc}", err=True)
        raise typer.Exit(1) from exc
