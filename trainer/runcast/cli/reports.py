"""``runcast reports list|draft|edit|publish|unpublish|show|export``: a run's training reports
(docs/reports.md), over the server's HTTP API.

Reads of published reports need no token for public runs; drafts, the Markdown source and every
write need a token with the ``team`` scope of the run's project. ``--json`` prints the API's
answer. Exit statuses: ``runcast.cli.exits``.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Annotated, Any

import typer

from runcast.cli.remote import Api, check_run_id, print_json
from runcast.cli.run_commands import TeamToken
from runcast.cli.runs import Json, Run, Server, Token

reports_app = typer.Typer(help="Write, publish and read a run's training reports on a server.", no_args_is_help=True)

Number = Annotated[int, typer.Argument(min=1, max=2**31 - 1, help="The report's number in its run (1, 2, ...).",
                                       metavar="N", show_default=False)]
Title = Annotated[str | None, typer.Option(help="The report's title.", show_default=False)]
MAX_TITLE = 200


def _base(run: str) -> str:
    return f"/runs/{check_run_id(run)}/reports"


def _title(title: str | None) -> str | None:
    if title is not None and (not title.strip() or len(title) > MAX_TITLE):
        raise typer.BadParameter(f"must be 1 to {MAX_TITLE} characters, not blank", param_hint="--title")
    return title


def _said(api: Api, report: dict[str, Any], what: str) -> str:
    return f"report {report['number']} {what} (version {report['version']}, {report['state']}): {api.base}{report['url']}"


@reports_app.command("list")
def list_command(run: Run, server: Server = None, token: Token = None, json_out: Json = False) -> None:
    """RUN's reports: published ones, and the drafts too with a team token."""
    with Api(server, token) as api:
        listed = api.call("GET", _base(run))
    if json_out:
        print_json(listed)
        return
    if not listed["reports"]:
        typer.echo("no reports", err=True)
        return
    typer.echo("\n".join(f"{r['number']:>3}  {r['state']:<9}  steps {r['from_step']}-{r['to_step']}  {r['title']}"
                         for r in listed["reports"]))


@reports_app.command("draft")
def draft_command(
    run: Run,
    from_step: Annotated[int, typer.Option("--from-step", min=0, max=2**62, help="The period's first step.",
                                           show_default=False)],
    to_step: Annotated[int, typer.Option("--to-step", min=0, max=2**62, help="The period's last step.",
                                         show_default=False)],
    title: Title = None,
    team_view: Annotated[bool, typer.Option("--team-view", help="Draft from everything the team sees (default: only "
                                            "what the run's policy publishes, as of its broadcast delay).")] = False,
    server: Server = None,
    token: TeamToken = None,
    json_out: Json = False,
) -> None:
    """A new draft of RUN generated from the record of steps --from-step to --to-step; prints its number and URL."""
    if to_step < from_step:
        raise typer.BadParameter("is below --from-step", param_hint="--to-step")
    title = _title(title) or f"Steps {from_step} to {to_step}"
    with Api(server, token) as api:
        drafted = api.call("GET", f"/runs/{check_run_id(run)}/report-draft", params={
            "from_step": from_step, "to_step": to_step, "audience": "team" if team_view else "public"})
        made = api.call("POST", _base(run), json={"title": title, "body": drafted["body"], "from_step": from_step,
                                                  "to_step": to_step})
        print_json(made) if json_out else typer.echo(_said(api, made, "drafted"))


def _read_body(path: Path) -> str:
    try:
        text = sys.stdin.read() if str(path) == "-" else path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise typer.BadParameter(f"cannot read {path}: {exc}", param_hint="--file") from None
    if not text.strip():
        raise typer.BadParameter(f"{path} is empty", param_hint="--file")
    return text


@reports_app.command("edit")
def edit_command(
    run: Run,
    number: Number,
    file: Annotated[Path, typer.Option("--file", "-f", help="The new Markdown body ('-': standard input).",
                                       show_default=False, dir_okay=False)],
    title: Title = None,
    from_step: Annotated[int | None, typer.Option("--from-step", min=0, max=2**62, help="A new first step "
                                                  "(default: the newest version's).", show_default=False)] = None,
    to_step: Annotated[int | None, typer.Option("--to-step", min=0, max=2**62, help="A new last step "
                                                "(default: the newest version's).", show_default=False)] = None,
    server: Server = None,
    token: TeamToken = None,
    json_out: Json = False,
) -> None:
    """A new version of report N of RUN with the body of --file (the public keeps the published one until you publish)."""
    body = _read_body(file)
    title = _title(title)
    with Api(server, token) as api:
        # The versions are the team's: anyone else is refused here, with the server's words, before any write.
        newest = api.call("GET", f"{_base(run)}/{number}/versions")["versions"][-1]
        start = newest["from_step"] if from_step is None else from_step
        end = newest["to_step"] if to_step is None else to_step
        if end < start:
            raise typer.BadParameter(f"{end} is below the first step {start}", param_hint="--to-step")
        edited = api.call("PUT", f"{_base(run)}/{number}", json={
            "title": title or newest["title"], "body": body, "from_step": start, "to_step": end})
        print_json(edited) if json_out else typer.echo(_said(api, edited, "saved"))


@reports_app.command("publish")
def publish_command(
    run: Run,
    number: Number,
    version: Annotated[int | None, typer.Option(min=1, max=2**31 - 1, help="The version to publish (default: the "
                                                "newest).", show_default=False)] = None,
    server: Server = None,
    token: TeamToken = None,
    json_out: Json = False,
) -> None:
    """Publish report N of RUN: its page, the run's Reports card and feed show it."""
    with Api(server, token) as api:
        shown = api.call("POST", f"{_base(run)}/{number}/publish", json={"version": version})
        print_json(shown) if json_out else typer.echo(_said(api, shown, "published"))


@reports_app.command("unpublish")
def unpublish_command(run: Run, number: Number, server: Server = None, token: TeamToken = None,
                      json_out: Json = False) -> None:
    """Take report N of RUN back to a draft: the public no longer sees it."""
    with Api(server, token) as api:
        shown = api.call("POST", f"{_base(run)}/{number}/unpublish")
        print_json(shown) if json_out else typer.echo(_said(api, shown, "unpublished"))


@reports_app.command("show")
def show_command(
    run: Run,
    number: Number,
    version: Annotated[int | None, typer.Option(min=1, max=2**31 - 1, help="A version (the team: any; default: the "
                                                "newest for the team, the published one for others).",
                                                show_default=False)] = None,
    server: Server = None,
    token: Token = None,
    json_out: Json = False,
) -> None:
    """Report N of RUN as Markdown (the team's source); without a team token, the published version's HTML."""
    with Api(server, token) as api:
        shown = api.call("GET", f"{_base(run)}/{number}", params={"version": version} if version else None)
    if json_out:
        print_json(shown)
    elif shown["body"] is not None:
        typer.echo(shown["body"], nl=not shown["body"].endswith("\n"))
    else:
        typer.echo("the Markdown source is the team's (a token with the 'team' scope); this is the published HTML",
                   err=True)
        typer.echo(shown["html"], nl=not shown["html"].endswith("\n"))


@reports_app.command("export")
def export_command(
    run: Run,
    number: Number,
    output: Annotated[Path, typer.Option("--output", "-o", help="The HTML file to write.", show_default=False,
                                         dir_okay=False)],
    server: Server = None,
    token: Token = None,
) -> None:
    """Report N of RUN as one static HTML file that opens offline with its charts (the published version's data)."""
    if output.parent and not output.parent.is_dir():
        raise typer.BadParameter(f"{output.parent} is not a directory", param_hint="--output")
    with Api(server, token) as api:
        content = api.fetch("GET", f"{_base(run)}/{number}/export.html").content
    try:
        output.write_bytes(content)
    except OSError as exc:
        raise typer.BadParameter(f"cannot write {output}: {exc}", param_hint="--output") from None
    typer.echo(f"report {number} of run {run} written to {output} ({len(content)} bytes)")
