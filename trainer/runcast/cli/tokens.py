"""``runcast token list|revoke``: a project's tokens on a server, with one of them (HTTP).

``runcast token create`` is the server's own verb (it writes the database directly: the
first token cannot come from the API). A secret is never shown again after it is made.
"""

from __future__ import annotations

import time
from typing import Annotated, Any

import typer

from runcast.cli.remote import SERVER_HELP, Api, print_json

token_app = typer.Typer(help="Project tokens: create (on the server), list and revoke (over HTTP).",
                        no_args_is_help=True)

Server = Annotated[str | None, typer.Option(help=SERVER_HELP, show_default=False)]
Token = Annotated[
    str | None, typer.Option(envvar="RUNCAST_TOKEN", help="A token of the project (required).", show_default=False)
]


def _when(at: float | None) -> str:
    return "-" if at is None else time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime(at))


@token_app.command("list")
def list_command(
    server: Server = None, token: Token = None,
    json_out: Annotated[bool, typer.Option("--json", help="Print the server's JSON answer.")] = False,
) -> None:
    """The tokens of the presented token's project: id, prefix, label, created, last used, revoked (UTC)."""
    with Api(server, token) as api:
        tokens: list[dict[str, Any]] = api.call("GET", "/tokens")["tokens"]
    if json_out:
        print_json({"tokens": tokens})
        return
    typer.echo(f"{'ID':>6}  {'PREFIX':<12} {'CREATED':<19}  {'LAST USED':<19}  {'REVOKED':<19}  LABEL")
    for t in tokens:
        typer.echo(f"{t['id']:>6}  {t['prefix'] + '…':<12} {_when(t['created_at']):<19}  "
                   f"{_when(t['last_used_at']):<19}  {_when(t['revoked_at']):<19}  {t['label'] or ''}")


@token_app.command("revoke")
def revoke_command(
    token_id: Annotated[int, typer.Argument(min=1, metavar="ID", help="The token's id (runcast token list).")],
    server: Server = None, token: Token = None,
    json_out: Annotated[bool, typer.Option("--json", help="Print the server's JSON answer.")] = False,
) -> None:
    """Revoke a token of the project: from the next request on it authenticates nothing."""
    with Api(server, token) as api:
        revoked = api.call("DELETE", f"/tokens/{token_id}")
    print_json(revoked) if json_out else typer.echo(f"token {revoked['id']} ({revoked['prefix']}…) revoked")
