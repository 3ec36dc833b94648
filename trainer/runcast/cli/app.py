"""The ``runcast`` Typer group: the SDK's verbs, then those plugins add (the server's).

Every verb here needs the SDK only (standard library, httpx; torch on use for ``train``).
The server's verbs (serve, worker, demo, db, token, storage, quarantine) live in
``runcast_server.cli`` and join through the ``runcast.cli_plugins`` entry points
(``runcast.cli.plugins``): this package never imports the server.
"""

from __future__ import annotations

import typer

from runcast.cli import export as export_cmd
from runcast.cli.download import download_command
from runcast.cli.estimate import estimate_command
from runcast.cli.plugins import register_plugins
from runcast.cli.import_cmd import import_command
from runcast.cli.replay import replay_command
from runcast.cli.sync import sync_command
from runcast.cli.train import train_command

app = typer.Typer(
    name="runcast",
    help="Broadcast model-training runs live: serve the dashboard and API, ingest, sync, export.",
    no_args_is_help=True,
    add_completion=False,
)
app.command("export")(export_cmd.export)
# Reference trainer (torch imported on use), replay of recorded runs, imports from other
# trackers (each reader imports its tool on use), memory estimate.
app.command("train")(train_command)
app.command("replay")(replay_command)
app.command("import")(import_command)
app.command("estimate")(estimate_command)
# Checkpoint downloads (rich imported on use) and the replay of spooled batches.
app.command("download")(download_command)
app.command("sync")(sync_command)
register_plugins(app)
