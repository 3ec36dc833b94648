"""What the Typer verbs that talk to a server (``runs``, ``token list|revoke``) share: its
address, the token, a JSON client whose failures exit with the statuses of ``exits``."""

from __future__ import annotations

import json
import os
from typing import Any, Final, NoReturn, Self

import httpx
import typer

from runcast.cli.exits import EXIT_FAILED, exit_status, server_message
from runcast.wire.events import ID_RE

DEFAULT_SERVER: Final = "http://127.0.0.1:8000"

SERVER_HELP: Final = f"Runcast server address (env RUNCAST_SERVER; default {DEFAULT_SERVER})."


def server_url(server: str | None) -> str:
    """The server's base URL: ``--server``, else RUNCAST_SERVER, else the local default."""
    base = (server or os.environ.get("RUNCAST_SERVER") or DEFAULT_SERVER).rstrip("/")
    if not base.startswith(("http://", "https://")):
        raise typer.BadParameter(f"{base!r} is not an http:// or https:// address", param_hint="--server")
    return base


def check_run_id(run: str) -> str:
    if not ID_RE.match(run):
        raise typer.BadParameter("must be 8-64 characters of A-Z, a-z, 0-9, '_' or '-'", param_hint="RUN")
    return run


def fail(response: httpx.Response) -> NoReturn:
    """Report a server's error answer and exit with its status."""
    typer.echo(f"error: {response.request.url} answered {response.status_code}: {server_message(response)}", err=True)
    raise typer.Exit(exit_status(response.status_code))


class Api:
    """A JSON client of one server's ``/api/v1``; every failure exits the command."""

    def __init__(self, server: str | None, token: str | None) -> None:
        self.base = server_url(server)
        headers = {"Authorization": f"Bearer {token}"} if token else {}
        self._http = httpx.Client(base_url=f"{self.base}/api/v1", headers=headers, timeout=httpx.Timeout(30.0))

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self._http.close()

    def fetch(self, method: str, path: str, **kwargs: Any) -> httpx.Response:
        """The server's answer to a request that succeeded (any media type)."""
        try:
            response = self._http.request(method, path, **kwargs)
        except httpx.HTTPError as exc:
            typer.echo(f"error: could not reach {self.base}: {exc}", err=True)
            raise typer.Exit(EXIT_FAILED) from exc
        if response.status_code >= 400:
            fail(response)
        return response

    def call(self, method: str, path: str, **kwargs: Any) -> Any:
        """The JSON answer to a request that succeeded."""
        return self.fetch(method, path, **kwargs).json()


def print_json(value: Any) -> None:
    typer.echo(json.dumps(value, indent=2, ensure_ascii=False))
