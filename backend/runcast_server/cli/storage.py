"""``runcast storage migrate``: move checkpoints recorded before the per-project layout.

The server package is imported inside the command (``runcast`` stays cheap to start).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import typer

if TYPE_CHECKING:
    from runcast_server.artifacts.storage import LocalStorage
    from runcast_server.core.db import Database

storage_app = typer.Typer(help="Manage the checkpoint storage.", no_args_is_help=True)


@storage_app.command("migrate")
def migrate_command(
    apply: bool = typer.Option(False, "--apply", help="Move the files and rewrite their events (default: print the plan)."),
) -> None:
    """Move checkpoint files outside their project's directory of the storage root into it.

    Checkpoints are served only from <storage root>/<project>/. This lists (or, with --apply,
    moves) every file a checkpoint event names elsewhere, and rewrites the events to name the
    new place. A file named by checkpoints of several projects is left alone and reported.
    """
    from runcast_server.artifacts.backend import storage_from_settings
    from runcast_server.artifacts.storage import LocalStorage
    from runcast_server.core.db import Database
    from runcast_server.core.settings import Settings

    settings = Settings()
    storage = storage_from_settings(settings)
    if not isinstance(storage, LocalStorage):
        typer.echo("runcast storage migrate moves files of local storage only; with RUNCAST_STORAGE_URL, "
                   "move each object to <prefix>/<project>/<key> with the store's tools (docs/artifacts.md).", err=True)
        raise typer.Exit(2)
    db = Database.open(settings.sqlalchemy_url)
    try:
        _migrate(db, storage, apply)
    finally:
        db.engine.dispose()


def _migrate(db: Database, storage: LocalStorage, apply: bool) -> None:
    from runcast_server.artifacts import layout

    with db.scope() as session:
        the_plan = layout.plan(session, storage)
        for line in the_plan.lines():
            typer.echo(line)
        if not the_plan.moves:
            typer.echo("nothing to move")
            return
        if not apply:
            typer.echo(f"{len(the_plan.moves)} files to move; run again with --apply")
            return
        problems = layout.apply(session, storage, the_plan)
    for line in problems:
        typer.echo(line, err=True)
    typer.echo(f"moved {len(the_plan.moves) - len(problems)} files")
    if problems:
        raise typer.Exit(1)
