"""``runcast plot RUN --key loss -o fig.svg``: a metric's chart as a figure file, drawn by the
server from the rollups the run page uses (``GET /api/v1/runs/{id}/plot.svg|png``)."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Annotated

import httpx
import typer

from runcast.cli.exits import server_message
from runcast.cli.export import DEFAULT_SERVER
from runcast.wire.events import ID_RE

FORMATS = (".svg", ".png")


def plot_command(
    run: Annotated[str, typer.Argument(help="The run id.", metavar="RUN", show_default=False)],
    key: Annotated[str, typer.Option(help="The metric to draw.", show_default=False)],
    output: Annotated[Path, typer.Option("--output", "-o", help="The figure file: .svg or .png.",
                                         show_default=False)],
    start: Annotated[int | None, typer.Option(min=0, help="First step; default: the first logged.",
                                              show_default=False)] = None,
    end: Annotated[int | None, typer.Option(min=0, help="Last step; default: the last logged.",
                                            show_default=False)] = None,
    width: Annotated[int, typer.Option(min=200, max=4000, help="Width in pixels (SVG: points).")] = 800,
    height: Annotated[int, typer.Option(min=100, max=3000, help="Height in pixels (SVG: points).")] = 450,
    log: Annotated[bool, typer.Option("--log", help="Logarithmic y axis.")] = False,
    scale: Annotated[int, typer.Option(min=1, max=4, help="PNG only: pixels per point (2 for print).")] = 1,
    server: Annotated[str | None, typer.Option(
        help=f"Runcast server address (env RUNCAST_SERVER; default {DEFAULT_SERVER}).")] = None,
    token: Annotated[str | None, typer.Option(envvar="RUNCAST_TOKEN", help="Project token; needed for private runs.",
                                              show_default=False)] = None,
) -> None:
    """Draw KEY of RUN as an SVG or PNG figure (min–max band per bucket, so spikes show)."""
    if not ID_RE.match(run):
        raise typer.BadParameter("must be 8-64 characters of A-Z, a-z, 0-9, '_' or '-'", param_hint="RUN")
    if not key:
        raise typer.BadParameter("must not be empty", param_hint="--key")
    suffix = output.suffix.lower()
    if suffix not in FORMATS:
        raise typer.BadParameter(f"must end in .svg or .png, not {output.name!r}", param_hint="--output")
    if start is not None and end is not None and end < start:
        raise typer.BadParameter("must not be less than --start", param_hint="--end")
    base = (server or os.environ.get("RUNCAST_SERVER") or DEFAULT_SERVER).rstrip("/")
    if not base.startswith(("http://", "https://")):
        raise typer.BadParameter(f"{base!r} is not an http:// or https:// address", param_hint="--server")
    params: dict[str, str | int] = {"key": key, "width": width, "height": height}
    params.update({name: value for name, value in (("start", start), ("end", end)) if value is not None})
    if log:
        params["log"] = "true"
    if suffix == ".png":
        params["scale"] = scale
    url = f"{base}/api/v1/runs/{run}/plot{suffix}"
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    try:
        response = httpx.get(url, params=params, headers=headers, timeout=httpx.Timeout(120.0))
    except httpx.HTTPError as exc:
        typer.echo(f"error: could not reach {base}: {exc}", err=True)
        raise typer.Exit(1) from exc
    if response.status_code >= 400:
        typer.echo(f"error: {url} answered {response.status_code}: {server_message(response)}", err=True)
        raise typer.Exit(1)
    partial = output.with_name(output.name + ".part")
    try:
        partial.write_bytes(response.content)
        partial.replace(output)
    finally:
        partial.unlink(missing_ok=True)
    typer.echo(f"wrote {len(response.content)} bytes to {output}", err=True)
