"""``runcast quarantine list|show|retry``: batches the worker could not store (server side).

Reads the database of the current settings (``RUNCAST_DATABASE_URL``, or the embedded
SQLite under ``RUNCAST_DATA_DIR``), like ``runcast token create``.
"""

from __future__ import annotations

import datetime as dt
import json
import time

import typer

from runcast_server.cli.ingest_cmds import ensure_schema, open_database

quarantine_app = typer.Typer(
    help="Batches the worker could not store (the ingest inbox's dead letters).", no_args_is_help=True
)
STATES = ("pending", "stored", "done", "quarantined", "all")


@quarantine_app.command("list")
def list_command(
    state: str = typer.Option("quarantined", help="pending, stored, done, quarantined or all."),
    limit: int = typer.Option(50, min=1, max=500, help="Rows to show."),
    as_json: bool = typer.Option(False, "--json", help="One JSON object instead of a table."),
) -> None:
    """Inbox rows (by default the quarantined ones), oldest first, and the counts per state."""
    from runcast_server.core.settings import Settings
    from runcast_server.inbox import quarantine

    if state not in STATES:
        raise typer.BadParameter(f"one of {', '.join(STATES)}", param_hint="--state")
    with open_database(Settings()) as db, db.scope() as session:
        page = quarantine.list_rows(session, state=None if state == "all" else state, after=None, limit=limit)
        counts = quarantine.counts(session)
    if as_json:
        typer.echo(json.dumps({**page, **counts}, indent=1))
        return
    states = ", ".join(f"{k} {v}" for k, v in counts["states"].items())
    typer.echo(f"inbox: {states}; detector failures {counts['detector_errors']}")
    for row in page["rows"]:
        when = dt.datetime.fromtimestamp(row["received_at"], dt.UTC).strftime("%Y-%m-%d %H:%M:%S")
        reason = row["error"] or row["detector_error"] or ""
        typer.echo(f"{row['id']:>10}  {row['state']:<11} {when}  {row['project'] or '-':<20} "
                   f"{row['events']:>5} events  {len(row['bad_events']):>4} bad  {reason[:100]}")
    if page["next_cursor"]:
        typer.echo("... more (raise --limit)")


@quarantine_app.command("show")
def show_command(inbox_id: int = typer.Argument(..., min=1, help="The inbox row's id.")) -> None:
    """One row as JSON, with the content of each event that could not be stored."""
    from runcast_server.core.settings import Settings
    from runcast_server.inbox import quarantine

    with open_database(Settings()) as db, db.scope() as session:
        found = quarantine.show(session, inbox_id)
    if found is None:
        typer.echo(f"error: no inbox row {inbox_id}", err=True)
        raise typer.Exit(1)
    typer.echo(json.dumps(found, indent=1))


@quarantine_app.command("retry")
def retry_command(inbox_id: int = typer.Argument(..., min=1, help="The inbox row's id.")) -> None:
    """Send a quarantined batch through the worker again (stored now when embedded)."""
    from runcast_server.context import AppContext
    from runcast_server.core.settings import Settings
    from runcast_server.inbox import quarantine
    from runcast_server.tasks import enqueue_ingest

    ctx = AppContext.build(Settings())  # this command's state (embedded: the row is stored here)
    try:
        ensure_schema(ctx.settings, ctx.database.engine)
        with ctx.database.scope() as session:
            ok = quarantine.retry(session, inbox_id, time.time())
        if not ok:
            typer.echo(f"error: inbox row {inbox_id} is not a quarantined batch: not quarantined, or an unreadable "
                       f"broker message with nothing to retry (see `runcast quarantine show {inbox_id}`)",
                       err=True)
            raise typer.Exit(1)
        try:
            enqueue_ingest(ctx, inbox_id)
        except Exception as exc:  # noqa: BLE001 - the row is pending: the sweeper enqueues it
            typer.echo(f"inbox row {inbox_id} is pending again; it could not be enqueued now ({exc}): the sweeper will")
            return
        with ctx.database.scope() as session:
            state = quarantine.show(session, inbox_id)
    finally:
        ctx.close()
    typer.echo(f"inbox row {inbox_id}: {state['state'] if state else 'gone'}")
