"""The ``runcast`` Typer group: the SDK's verbs, then those plugins add (the server's).

Every verb here needs the SDK only (standard library, httpx; torch on use for ``train``).
``sync``, ``import``, ``export`` and ``download`` are argparse parsers (``runcast.cli.sdk``,
so they run without typer); here they are listed and forwarded to those parsers.
The server's verbs (serve, worker, demo, db, token, storage, quarantine) live in
``runcast_server.cli`` and join through the ``runcast.cli_plugins`` entry points
(``runcast.cli.plugins``): this package never imports the server. Shell completion is
typer's: ``runcast --install-completion`` (bash, zsh, fish, PowerShell).
"""

from __future__ import annotations

import typer

from runcast.cli import sdk
from runcast.cli.estimate import estimate_command
from runcast.cli.eval_cmd import eval_app
from runcast.cli.plot import plot_command
from runcast.cli.plugins import register_plugins
from runcast.cli.replay import replay_command
from runcast.cli.reports import reports_app
from runcast.cli.run_commands import VERBS as COMMAND_VERBS
from runcast.cli.runs import runs_app
from runcast.cli.tokens import token_app
from runcast.cli.train import train_command

app = typer.Typer(
    name="runcast",
    help="Broadcast model-training runs live: serve the dashboard and API, ingest, sync, export.",
    no_args_is_help=True,
)


def _forward(verb: str) -> None:
    """List ``verb`` in the group; its arguments go, untouched, to its one parser (runcast.cli.sdk)."""

    def command(ctx: typer.Context) -> None:
        raise SystemExit(sdk.main([verb, *ctx.args]))

    app.command(
        verb,
        help=sdk.help_line(verb),
        add_help_option=False,  # --help is the parser's
        context_settings={"allow_extra_args": True, "ignore_unknown_options": True},
    )(command)


for _verb in sdk.VERBS:
    _forward(_verb)
# Reference trainer (torch imported on use), replay of recorded runs, imports from other
# trackers (each reader imports its tool on use), memory estimate.
app.command("train")(train_command)
app.command("replay")(replay_command)
app.command("estimate")(estimate_command)
# A figure of a metric for a paper, drawn by the server (docs/sharing.md).
app.command("plot")(plot_command)
# Runs and tokens on a server, over HTTP (a laptop against a remote server works: docs/cli.md).
for _name, _command in COMMAND_VERBS.items():  # commands to the live trainer (docs/commands.md)
    runs_app.command(_name)(_command)
app.add_typer(runs_app, name="runs")
app.add_typer(reports_app, name="reports")  # training reports (docs/reports.md)
app.add_typer(token_app, name="token")  # the server's plugin adds `token create`
# Evaluations of runs: an evaluation harness's results imported as the run's scores (docs/import.md).
app.add_typer(eval_app, name="eval")
register_plugins(app)
