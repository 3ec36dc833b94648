"""``runcast runs list|show|rename|tag|archive|delete|policy``: runs on a server, over its HTTP API.

Reads need no token for public runs (a project's token adds its private and unlisted
ones); writes need a token of the run's project. ``--json`` prints the API's answer.
Exit statuses: ``runcast.cli.exits``.
"""

from __future__ import annotations

import sys
import time
from enum import Enum
from typing import Annotated, Any

import typer

from runcast.cli.exits import EXIT_USAGE
from runcast.cli.remote import SERVER_HELP, Api, check_run_id, print_json
from runcast.wire.checks import EventError, check_tags

runs_app = typer.Typer(help="List, show, rename, tag, archive and delete runs on a server, and set what the public sees of them.", no_args_is_help=True)

Server = Annotated[str | None, typer.Option(help=SERVER_HELP, show_default=False)]
Token = Annotated[str | None, typer.Option(envvar="RUNCAST_TOKEN", help="Project token.", show_default=False)]
WriteToken = Annotated[
    str | None, typer.Option(envvar="RUNCAST_TOKEN", help="A token of the run's project (required).", show_default=False)
]
Json = Annotated[bool, typer.Option("--json", help="Print the server's JSON answer.")]
Run = Annotated[str, typer.Argument(help="The run id.", metavar="RUN", show_default=False)]


class Status(str, Enum):
    running = "running"
    finished = "finished"
    failed = "failed"
    killed = "killed"
    stalled = "stalled"


class Archived(str, Enum):
    exclude = "exclude"
    include = "include"
    only = "only"


def _age(seconds: float | None) -> str:
    if seconds is None:
        return "-"
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60)):
        if seconds >= size:
            return f"{seconds / size:.0f}{unit}"
    return f"{seconds:.0f}s"


TAGS_WIDTH = 40


def _tags(tags: list[str]) -> str:
    """The tags that fit in ``TAGS_WIDTH``, then how many more (``runs show`` lists them all)."""
    shown: list[str] = []
    for i, tag in enumerate(tags):
        more = f" +{len(tags) - i}"
        if len(",".join([*shown, tag])) + (len(more) if i < len(tags) - 1 else 0) > TAGS_WIDTH and shown:
            return ",".join(shown) + more
        shown.append(tag)
    return ",".join(shown)


def _table(runs: list[dict[str, Any]]) -> None:
    from rich.console import Console
    from rich.table import Table

    table = Table(box=None, pad_edge=False)
    # Every column keeps its room; the tags are cut to TAGS_WIDTH (a run may hold 64 of them).
    for column in ("ID", "PROJECT", "NAME", "STATUS", "STEP", "AGE"):
        table.add_column(column, no_wrap=column != "NAME", overflow="fold", min_width=len(column) + 2)
    table.add_column("TAGS", no_wrap=True, overflow="ellipsis", max_width=TAGS_WIDTH)
    now = time.time()
    for run in runs:
        status = run["status"] + (" (archived)" if run.get("archived_at") else "")
        table.add_row(run["id"], run["project"], run["name"], status, str(run["last_step"] if run["last_step"]
                      is not None else "-"), _age(now - run["created_at"]), _tags(run.get("tags") or []))
    Console(soft_wrap=False, width=None if sys.stdout.isatty() else 200).print(table)


@runs_app.command("list")
def list_command(
    project: Annotated[str | None, typer.Option(help="Only runs of this project.", show_default=False)] = None,
    status: Annotated[Status | None, typer.Option(help="Only runs with this status.", show_default=False)] = None,
    archived: Annotated[Archived, typer.Option(help="Archived runs: left out, included, or only them.")] = Archived.exclude,
    limit: Annotated[int, typer.Option(min=1, max=10_000, help="At most this many runs.")] = 50,
    server: Server = None,
    token: Token = None,
    json_out: Json = False,
) -> None:
    """Runs newest first: public ones, plus the token's project's private and unlisted ones."""
    params: dict[str, Any] = {"archived": archived.value}
    if project:
        params["project"] = project
    if status:
        params["status"] = status.value
    runs: list[dict[str, Any]] = []
    with Api(server, token) as api:
        cursor = None
        while len(runs) < limit:
            page = api.call("GET", "/runs", params={**params, "limit": min(200, limit - len(runs)),
                                                    **({"cursor": cursor} if cursor else {})})
            runs += page["runs"]
            cursor = page["next_cursor"]
            if cursor is None:
                break
    if json_out:
        print_json({"runs": runs, "more": cursor is not None})
    elif runs:
        _table(runs)
    else:
        typer.echo("no runs", err=True)


@runs_app.command("show")
def show_command(run: Run, server: Server = None, token: Token = None, json_out: Json = False) -> None:
    """A run's summary, config, metric keys and segments."""
    with Api(server, token) as api:
        detail = api.call("GET", f"/runs/{check_run_id(run)}")
    if json_out:
        print_json(detail)
        return
    lines = [
        f"id          {detail['id']}",
        f"name        {detail['name']}",
        f"project     {detail['project']}",
        f"status      {detail['status']}" + (" (archived)" if detail.get("archived_at") else ""),
        f"visibility  {detail['visibility']}",
        f"last step   {detail['last_step'] if detail['last_step'] is not None else '-'}",
        f"tags        {', '.join(detail.get('tags') or ()) or '-'}",
        f"segments    {len(detail['segments'])}",
        f"keys        {', '.join(detail['keys']) or '-'}",
    ]
    for key, last in sorted(detail["last_values"].items()):
        lines.append(f"  {key} = {last['value']} (step {last['step']})")
    if detail["config"]:
        lines.append("config")
        lines += [f"  {k} = {v}" for k, v in sorted(detail["config"].items())]
    typer.echo("\n".join(lines))


def _change(run: str, body: dict[str, Any], server: str | None, token: str | None) -> dict[str, Any]:
    with Api(server, token) as api:
        changed: dict[str, Any] = api.call("PATCH", f"/runs/{check_run_id(run)}", json=body)  # the run, as JSON
        return changed


@runs_app.command("rename")
def rename_command(
    run: Run,
    name: Annotated[str, typer.Argument(help="The new name.", show_default=False)],
    server: Server = None,
    token: WriteToken = None,
    json_out: Json = False,
) -> None:
    """Give RUN a new display name."""
    if not name.strip():
        raise typer.BadParameter("must not be blank", param_hint="NAME")
    summary = _change(run, {"name": name}, server, token)
    print_json(summary) if json_out else typer.echo(f"run {summary['id']} renamed to {summary['name']!r}")


@runs_app.command("tag")
def tag_command(
    run: Run,
    add: Annotated[list[str] | None, typer.Option("--add", "-a", help="Add this tag (repeatable).", show_default=False)] = None,
    remove: Annotated[
        list[str] | None, typer.Option("--remove", "-r", help="Remove this tag (repeatable).", show_default=False)
    ] = None,
    server: Server = None,
    token: WriteToken = None,
    json_out: Json = False,
) -> None:
    """Add and remove tags of RUN (adds first, then removes)."""
    if not add and not remove:
        raise typer.BadParameter("give --add TAG or --remove TAG", param_hint="--add")
    try:
        check_tags(list(add or []), "tag")  # the SDK's rule, so a run never holds a tag init() refuses
    except EventError as exc:
        raise typer.BadParameter(f"{exc.field.replace('tag.', 'tag ')}: {exc.message}", param_hint="--add") from None
    summary = _change(run, {"tags": {"add": add or [], "remove": remove or []}}, server, token)
    print_json(summary) if json_out else typer.echo(f"run {summary['id']} tags: {', '.join(summary['tags']) or '-'}")


@runs_app.command("archive")
def archive_command(
    run: Run,
    restore: Annotated[bool, typer.Option("--restore", help="Bring an archived run back into the list.")] = False,
    server: Server = None,
    token: WriteToken = None,
    json_out: Json = False,
) -> None:
    """Archive RUN: left out of run lists (unless asked for), still readable by id."""
    summary = _change(run, {"archived": not restore}, server, token)
    state = "restored" if restore else "archived"
    print_json(summary) if json_out else typer.echo(f"run {summary['id']} {state}")


@runs_app.command("delete")
def delete_command(
    run: Run,
    yes: Annotated[bool, typer.Option("--yes", "-y", help="Do not ask for confirmation.")] = False,
    server: Server = None,
    token: WriteToken = None,
    json_out: Json = False,
) -> None:
    """Delete RUN and everything stored for it (points, timeline, alerts). Cannot be undone."""
    check_run_id(run)
    if not yes:
        if not sys.stdin.isatty():
            typer.echo("error: deleting needs --yes when standard input is not a terminal", err=True)
            raise typer.Exit(EXIT_USAGE)
        typer.confirm(f"Delete run {run} and all its data?", abort=True)
    with Api(server, token) as api:
        done = api.call("DELETE", f"/runs/{run}")
    if json_out:
        print_json(done)
    else:
        typer.echo(f"run {done['run']} deleted: {done['points']} points, {done['segments']} segment(s), "
                   f"{done['events']} timeline event(s)")


def _setting(help_text: str) -> Any:
    """The option of one policy setting (``Annotated[str | None, _setting(...)]``)."""
    return typer.Option(help=help_text, show_default=False)


@runs_app.command("policy")
def policy_command(
    run: Annotated[str | None, typer.Argument(help="The run id (or --project for the project's default).",
                                              metavar="RUN", show_default=False)] = None,
    project: Annotated[str | None, typer.Option(help="Change the project's default instead of a run's.",
                                                show_default=False)] = None,
    metrics: Annotated[str | None, _setting("all, none, or key patterns separated by commas ('train/*,loss').")] = None,
    config: Annotated[str | None, _setting("all, none, or config keys separated by commas.")] = None,
    env: Annotated[str | None, _setting("shown or hidden.")] = None,
    code: Annotated[str | None, _setting("none, sha or diff.")] = None,
    data_mix: Annotated[str | None, _setting("shown or hidden.")] = None,
    manifests: Annotated[str | None, _setting("none, summary or previews.")] = None,
    notes: Annotated[str | None, _setting("shown or hidden.")] = None,
    checkpoints: Annotated[str | None, _setting("none, metadata or downloadable.")] = None,
    alerts: Annotated[str | None, _setting("public or team.")] = None,
    samples: Annotated[str | None, _setting("shown or hidden (text generations).")] = None,
    evals: Annotated[str | None, _setting("shown or hidden (evaluation scores).")] = None,
    media: Annotated[str | None, _setting("shown or hidden (images, tables, histograms).")] = None,
    delay_s: Annotated[str | None, _setting("Broadcast delay in seconds (0..604800; 0: live).")] = None,
    reset: Annotated[list[str] | None, typer.Option("--reset", help="Return this setting to the default below "
                                                    "(repeatable).", show_default=False)] = None,
    server: Server = None,
    token: WriteToken = None,
    json_out: Json = False,
) -> None:
    """Show or change what the public sees of RUN (or of --project's runs): one setting per kind of data.

    Without a setting it prints the policy in force. The team (a token of the project) always sees everything.
    """
    from runcast.wire.policy import FIELDS, PolicyError, check_policy

    if (run is None) == (project is None):
        raise typer.BadParameter("give RUN or --project NAME (not both)", param_hint="RUN")
    given = {"metrics": metrics, "config": config, "env": env, "code": code, "data_mix": data_mix,
             "manifests": manifests, "notes": notes, "checkpoints": checkpoints, "alerts": alerts, "samples": samples,
             "evals": evals, "media": media, "delay_s": delay_s}
    change: dict[str, Any] = {k: v for k, v in given.items() if v is not None}
    for name in reset or ():
        if name not in FIELDS:
            raise typer.BadParameter(f"unknown setting {name!r}; known: {', '.join(FIELDS)}", param_hint="--reset")
        change[name] = None
    try:
        change = check_policy(change)
    except PolicyError as exc:
        flag = "--" + exc.field.split(".", 1)[-1].replace("_", "-")
        raise typer.BadParameter(exc.message, param_hint=flag) from None
    path = f"/runs/{check_run_id(run)}/policy" if run is not None else f"/projects/{project}/policy"
    with Api(server, token) as api:
        answer = api.call("PUT", path, json=change) if change else api.call("GET", path)
    if json_out:
        print_json(answer)
        return
    policy = answer["policy"]
    width = max(len(k) for k in policy)
    typer.echo("\n".join(f"{k.ljust(width)}  {','.join(v) if isinstance(v, list) else v}" for k, v in policy.items()))
