"""``runcast export RUN``: download a run's raw points as JSONL or CSV from a server."""

from __future__ import annotations

import json
import os
import sys
from enum import Enum
from pathlib import Path
from typing import Annotated, BinaryIO

import httpx
import typer

from runcast.events import ID_RE

DEFAULT_SERVER = "http://127.0.0.1:8000"


class Format(str, Enum):
    jsonl = "jsonl"
    csv = "csv"


def _server_message(response: httpx.Response) -> str:
    """The ``error.message`` of a Runcast error body, else the body's start."""
    text = response.read().decode(errors="replace")
    try:
        error = json.loads(text)["error"]
        message = str(error["message"])
        return f"{message} ({error['field']})" if error.get("field") else message
    except (ValueError, KeyError, TypeError):
        return text.strip()[:300] or response.reason_phrase


def _stream_to(response: httpx.Response, out: BinaryIO) -> int:
    total = 0
    for chunk in response.iter_bytes():
        out.write(chunk)
        total += len(chunk)
    return total


def export(
    run: Annotated[
        str, typer.Argument(help="The run id.", metavar="RUN", show_default=False)
    ],
    server: Annotated[
        str | None,
        typer.Option(
            help=f"Runcast server address (env RUNCAST_SERVER; default {DEFAULT_SERVER})."
        ),
    ] = None,
    token: Annotated[
        str | None,
        typer.Option(
            envvar="RUNCAST_TOKEN",
            help="Project token; needed for private runs.",
            show_default=False,
        ),
    ] = None,
    fmt: Annotated[
        Format, typer.Option("--format", help="Output format.", case_sensitive=False)
    ] = Format.jsonl,
    key: Annotated[
        str | None, typer.Option(help="Only this metric.", show_default=False)
    ] = None,
    output: Annotated[
        Path | None,
        typer.Option("--output", "-o", help="Write here instead of standard output."),
    ] = None,
) -> None:
    """Stream every point of RUN (rows: segment, key, step, value) from the server."""
    if not ID_RE.match(run):
        raise typer.BadParameter(
            "must be 8-64 characters of A-Z, a-z, 0-9, '_' or '-'", param_hint="RUN"
        )
    base = (server or os.environ.get("RUNCAST_SERVER") or DEFAULT_SERVER).rstrip("/")
    if not base.startswith(("http://", "https://")):
        raise typer.BadParameter(
            f"{base!r} is not an http:// or https:// address", param_hint="--server"
        )
    if key is not None and not key:
        raise typer.BadParameter("must not be empty", param_hint="--key")
    params = {"format": fmt.value, **({"key": key} if key else {})}
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    url = f"{base}/api/v1/runs/{run}/export"
    partial = output.with_name(output.name + ".part") if output else None
    try:
        with httpx.stream(
            "GET", url, params=params, headers=headers, timeout=httpx.Timeout(30.0)
        ) as response:
            if response.status_code >= 400:
                typer.echo(
                    f"error: {url} answered {response.status_code}: {_server_message(response)}",
                    err=True,
                )
                raise typer.Exit(1)
            if partial is None:
                _stream_to(response, sys.stdout.buffer)
                sys.stdout.buffer.flush()
            else:
                with partial.open("wb") as out:
                    size = _stream_to(response, out)
                partial.replace(output)  # type: ignore[arg-type]
                typer.echo(f"wrote {size} bytes to {output}", err=True)
    except httpx.HTTPError as exc:
        typer.echo(f"error: could not export from {base}: {exc}", err=True)
        raise typer.Exit(1) from exc
    finally:
        if partial is not None and partial.exists():
            partial.unlink()
