"""``runcast runs stop|checkpoint|pause|resume|set|commands``: commands to a run's live trainer
(docs/commands.md), over the server's HTTP API with a ``team`` token of the run's project.

Each sending verb prints the command's id and state (``--json``: the API's answer); ``runs
commands`` lists who sent what, when, why, and what the trainer did. Exit statuses:
``runcast.cli.exits`` (a finished run: 409, exit 1).
"""

from __future__ import annotations

import math
import sys
import time
from collections.abc import Callable
from typing import Annotated, Any

import typer

from runcast.cli.remote import Api, check_run_id, print_json
from runcast.cli.runs import Json, Run, Server, Token

TeamToken = Annotated[
    str | None, typer.Option(envvar="RUNCAST_TOKEN", help="A token of the run's project with the team scope "
                             "(required).", show_default=False)
]
FROM_CLI = "sent from the command line"


def _reason(required: bool) -> Any:
    """The ``--reason`` option (``Annotated[str, _reason(...)]``): shown with the command on the public record."""
    extra = "" if required else f" (default: {FROM_CLI!r})"
    return typer.Option("--reason", help=f"Why: shown with the command on the run's public record{extra}.",
                        show_default=False)


def _send(run: str, body: dict[str, Any], server: str | None, token: str | None, json_out: bool) -> None:
    if not body["reason"].strip():
        raise typer.BadParameter("must not be blank", param_hint="--reason")
    with Api(server, token) as api:
        sent: dict[str, Any] = api.call("POST", f"/runs/{check_run_id(run)}/commands", json=body)
    if json_out:
        print_json(sent)
        return
    what = sent["kind"] + (f" {sent['name']}={sent['value']:g}" if sent["kind"] == "set" else "")
    typer.echo(f"command {sent['command']} ({what}) sent to run {run}: {sent['state']}; "
               f"`runcast runs commands {run}` shows the trainer's answer")


def stop_command(run: Run, reason: Annotated[str, _reason(True)], server: Server = None, token: TeamToken = None,
                 json_out: Json = False) -> None:
    """Ask RUN's trainer to checkpoint at its current step and exit 0."""
    _send(run, {"kind": "stop", "reason": reason}, server, token, json_out)


def checkpoint_command(run: Run, reason: Annotated[str, _reason(False)] = FROM_CLI, server: Server = None,
                       token: TeamToken = None, json_out: Json = False) -> None:
    """Ask RUN's trainer to save a checkpoint now."""
    _send(run, {"kind": "checkpoint", "reason": reason}, server, token, json_out)


def pause_command(run: Run, reason: Annotated[str, _reason(False)] = FROM_CLI, server: Server = None,
                  token: TeamToken = None, json_out: Json = False) -> None:
    """Ask RUN's trainer to hold (it keeps its heartbeat) until `runs resume`."""
    _send(run, {"kind": "pause", "reason": reason}, server, token, json_out)


def resume_command(run: Run, reason: Annotated[str, _reason(False)] = FROM_CLI, server: Server = None,
                   token: TeamToken = None, json_out: Json = False) -> None:
    """Ask RUN's paused trainer to go on."""
    _send(run, {"kind": "resume", "reason": reason}, server, token, json_out)


def set_command(
    run: Run,
    name: Annotated[str, typer.Argument(help="A tunable the training script declared (run.tunable).",
                                        metavar="NAME", show_default=False)],
    value: Annotated[str, typer.Argument(help="Its new value (a number within the tunable's bounds).",
                                         metavar="VALUE", show_default=False)],
    reason: Annotated[str, _reason(True)],
    server: Server = None,
    token: TeamToken = None,
    json_out: Json = False,
) -> None:
    """Ask RUN's trainer to set the tunable NAME to VALUE (from the step it acknowledges on)."""
    try:
        number = float(value)
    except ValueError:
        raise typer.BadParameter(f"{value!r} is not a number", param_hint="VALUE") from None
    if not math.isfinite(number):
        raise typer.BadParameter(f"{value!r} is not a finite number", param_hint="VALUE")
    _send(run, {"kind": "set", "reason": reason, "name": name, "value": number}, server, token, json_out)


def _when(at: float | None) -> str:
    return "-" if at is None else time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime(at))


def _result(c: dict[str, Any]) -> str:
    if c["state"] != "acknowledged":
        return c["message"] or "-"
    where = f" at step {c['step']}" if c["step"] is not None else ""
    return f"{c['outcome']}{where}" + (f": {c['message']}" if c["message"] else "")


def commands_command(run: Run, server: Server = None, token: Token = None, json_out: Json = False) -> None:
    """RUN's commands, oldest first: who sent each, when (UTC), what, why, its state and the trainer's answer."""
    with Api(server, token) as api:
        listed: dict[str, Any] = api.call("GET", f"/runs/{check_run_id(run)}/commands")
    if json_out:
        print_json(listed)
        return
    if not listed["commands"]:
        typer.echo("no commands", err=True)
        return
    from rich.console import Console
    from rich.table import Table

    table = Table(box=None, pad_edge=False)
    for column in ("WHO", "WHEN", "KIND", "REASON", "STATE", "RESULT"):
        table.add_column(column, overflow="fold", no_wrap=column in ("WHEN", "KIND", "STATE"))
    for c in listed["commands"]:
        kind = c["kind"] + (f" {c['name']}={c['value']:g}" if c["kind"] == "set" else "")
        table.add_row(c["sender"], _when(c["created_at"]), kind, c["reason"], c["state"], _result(c))
    Console(soft_wrap=False, width=None if sys.stdout.isatty() else 200).print(table)


VERBS: dict[str, Callable[..., None]] = {
    "stop": stop_command, "checkpoint": checkpoint_command, "pause": pause_command, "resume": resume_command,
    "set": set_command, "commands": commands_command,
}
"""The verbs ``runcast.cli.app`` adds to ``runcast runs``."""
