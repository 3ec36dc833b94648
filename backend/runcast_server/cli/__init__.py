"""The server's verbs of the ``runcast`` command: serve, worker, demo, db, token, user, project, storage, quarantine.

``register`` is the ``runcast.cli_plugins`` entry point (pyproject.toml) that adds them to
the SDK's Typer group; the SDK never imports this package. Each module imports only typer
at load time and the server inside its commands, so ``runcast sync`` or ``runcast train``
stay cheap to start.
"""

from __future__ import annotations

import importlib.util

import typer

from runcast_server.cli.demo import demo_command
from runcast_server.cli.ingest_cmds import token_create_command, worker_command
from runcast_server.cli.people import project_app, user_app
from runcast_server.cli.quarantine import quarantine_app
from runcast_server.cli.serve import db_upgrade_command, serve_command
from runcast_server.cli.storage import storage_app

# What the verbs need beyond typer: the `server` extra. Without it (`pip install 'runcast[cli]'`)
# they are left out, and `runcast serve` says "No such command" rather than a traceback.
SERVER_PACKAGES = ("fastapi", "sqlalchemy", "uvicorn", "pydantic_settings")


def register(app: typer.Typer) -> None:
    """Add the server's verbs to the ``runcast`` group, when the server's packages are installed."""
    if any(importlib.util.find_spec(package) is None for package in SERVER_PACKAGES):
        return
    app.command("serve")(serve_command)
    app.command("worker")(worker_command)
    app.command("demo")(demo_command)
    db_app = typer.Typer(help="Manage the database schema.", no_args_is_help=True)
    db_app.command("upgrade")(db_upgrade_command)
    app.add_typer(db_app, name="db")
    _token_group(app).command("create")(token_create_command)
    app.add_typer(user_app, name="user")
    app.add_typer(project_app, name="project")
    app.add_typer(storage_app, name="storage")
    app.add_typer(quarantine_app, name="quarantine")


def _token_group(app: typer.Typer) -> typer.Typer:
    """The ``token`` group the SDK made (list, revoke over HTTP), or a new one."""
    for group in app.registered_groups:
        if group.name == "token" and group.typer_instance is not None:
            return group.typer_instance
    token_app = typer.Typer(help="Manage project ingest tokens and admin tokens.", no_args_is_help=True)
    app.add_typer(token_app, name="token")
    return token_app
