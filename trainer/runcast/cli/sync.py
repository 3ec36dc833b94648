"""``runcast sync DIR``: send the batches that runs left in their local spools.

Spools are replayed oldest first (so a resumed run's segments stay in order), each
from its recorded offset; what a crashed run left in its overflow file is sent after
its spooled batches. A spool that is fully delivered is deleted. The command
stops at the first batch the service cannot take now (unreachable, busy, or a
wrong token), keeping what is left for the next try, and exits non-zero whenever
something was not delivered.
"""

from __future__ import annotations

from pathlib import Path

import typer

from runcast.spool import Spool, SpoolBusy, absorb_overflow, default_dir, find_spools, replay
from runcast.transport import Transport, make_transport


def sync_command(
    directory: Path | None = typer.Argument(
        None, help="A spool, or a folder holding spools (default: RUNCAST_SPOOL_DIR or ~/.cache/runcast/spool)."
    ),
    server: str | None = typer.Option(
        None, "--server", envvar="RUNCAST_SERVER", help="Send here instead of the URL each spool recorded."
    ),
    token: str | None = typer.Option(
        None, "--token", envvar="RUNCAST_TOKEN", help="Project ingest token (never stored in the spool)."
    ),
    timeout: float = typer.Option(10.0, min=0.1, help="Seconds to wait for each batch."),
) -> None:
    """Replay every spool found under DIRECTORY, in order, and report what was sent."""
    root = directory if directory is not None else default_dir()
    paths = find_spools(root)
    if not paths:
        typer.echo(f"no spools under {root}")
        return
    transports: dict[str, Transport] = {}
    total = 0
    complete = True
    try:
        for path in paths:
            ok, sent, stop = _sync_one(path, server, token, timeout, transports)
            total += sent
            complete = complete and ok
            if stop:
                break
    finally:
        for transport in transports.values():
            transport.close()
    typer.echo(f"sent {total} events from {len(paths)} spool(s)" + ("" if complete else "; some were not sent"))
    if not complete:
        raise typer.Exit(1)


def _sync_one(
    path: Path, server: str | None, token: str | None, timeout: float, transports: dict[str, Transport]
) -> tuple[bool, int, bool]:
    """Replay one spool: (everything delivered, events sent, stop the whole sync)."""
    try:
        spool = Spool.open(path)
    except SpoolBusy:
        typer.echo(f"{path}: in use by a running process; skipped")
        return False, 0, False
    try:
        meta = spool.meta
        label = f"{path.name} ({meta.get('project')}/{meta.get('name')})"
        url = server or meta.get("url")
        if not url:
            typer.echo(f"{label}: no server recorded; pass --server")
            return False, 0, False
        try:
            absorb_overflow(spool)  # what a crashed run left on disk beyond its queue
        except ValueError as exc:
            typer.echo(f"{label}: {exc}")
            return False, 0, False
        if url not in transports:
            try:
                transports[url] = make_transport(url, token)
            except ValueError as exc:
                typer.echo(f"{label}: {exc}")
                return False, 0, True
        result = replay(spool, transports[url], timeout=timeout, stop_on=(401,))
        line = f"{label}: sent {result.sent_events} events in {result.sent_batches} batches to {transports[url].url}"
        if result.rejections:
            line += (
                f"; {len(result.rejections)} batch(es), {result.rejected_events} events rejected: "
                f"{result.rejections[0]}"
            )
        typer.echo(line)
        if result.stopped is not None:
            typer.echo(f"{label}: stopped, the rest stays spooled: {result.stopped}")
            return False, result.sent_events, True
        spool.remove()
        return not result.rejections, result.sent_events, False
    finally:
        spool.close()
