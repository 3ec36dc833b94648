"""``runcast sync DIR``: send the batches that runs left in their local spools.

Spools are replayed oldest first (so a resumed run's segments stay in order), each
from its recorded offset; what a crashed run left in its overflow file is sent after
its spooled batches. A spool that is fully delivered is deleted. The command
stops at the first batch the service cannot take now (unreachable, busy, or a
wrong token), keeping what is left for the next try, and exits non-zero whenever
something was not delivered. A DIRECTORY that does not exist is bad input (exit 2); the
default directory missing means nothing was ever spooled (exit 0).
"""

from __future__ import annotations

import argparse
import os
from collections.abc import Callable
from pathlib import Path

from runcast.cli.progress import Bars, wanted
from runcast.cli.sdk import UsageError
from runcast.spool import (
    Spool,
    SpoolBusy,
    absorb_overflow,
    default_dir,
    find_spools,
    replay,
)
from runcast.transport import Transport, make_transport

HELP = "Replay every spool found under DIRECTORY, in order, and report what was sent."


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "directory", nargs="?", type=Path, metavar="DIRECTORY",
        help="A spool, or a folder holding spools (default: RUNCAST_SPOOL_DIR or ~/.cache/runcast/spool).",
    )  # fmt: skip
    parser.add_argument("--server", help="Send here instead of the URL each spool recorded (env RUNCAST_SERVER).")
    parser.add_argument("--token", help="Project ingest token, never stored in the spool (env RUNCAST_TOKEN).")
    parser.add_argument("--timeout", type=float, default=10.0, help="Seconds to wait for each batch.")
    parser.add_argument("--quiet", "-q", action="store_true", help="No progress bar.")


def run(args: argparse.Namespace) -> int:
    """Replay every spool found under DIRECTORY, in order, and report what was sent."""
    if not args.timeout >= 0.1:
        raise UsageError("--timeout", f"must be at least 0.1 seconds, got {args.timeout:g}")
    server = args.server or os.environ.get("RUNCAST_SERVER") or None
    token = args.token or os.environ.get("RUNCAST_TOKEN") or None
    if args.directory is not None and not args.directory.exists():
        raise UsageError("DIRECTORY", f"{args.directory} does not exist")
    root = args.directory if args.directory is not None else default_dir()
    paths = find_spools(root)
    if not paths:
        print(f"no spools under {root}")
        return 0
    transports: dict[str, Transport] = {}
    total = 0
    complete = True
    with Bars(wanted(args.quiet)) as bars:
        bar = bars.task("sync", total=None, unit="events")
        try:
            for path in paths:
                ok, sent, stop = _sync_one(path, server, token, args.timeout, transports, lambda n: bars.advance(bar, n))
                total += sent
                complete = complete and ok
                if stop:
                    break
        finally:
            for transport in transports.values():
                transport.close()
    print(f"sent {total} events from {len(paths)} spool(s)" + ("" if complete else "; some were not sent"))
    return 0 if complete else 1


def _sync_one(
    path: Path,
    server: str | None,
    token: str | None,
    timeout: float,
    transports: dict[str, Transport],
    on_batch: Callable[[int], None],
) -> tuple[bool, int, bool]:
    """Replay one spool: (everything delivered, events sent, stop the whole sync)."""
    try:
        spool = Spool.open(path)
    except SpoolBusy:
        print(f"{path}: in use by a running process; skipped")
        return False, 0, False
    try:
        meta = spool.meta
        label = f"{path.name} ({meta.get('project')}/{meta.get('name')})"
        url = server or meta.get("url")
        if not url:
            print(f"{label}: no server recorded; pass --server")
            return False, 0, False
        try:
            absorb_overflow(spool)  # what a crashed run left on disk beyond its queue
        except ValueError as exc:
            print(f"{label}: {exc}")
            return False, 0, False
        if url not in transports:
            try:
                transports[url] = make_transport(url, token)
            except ValueError as exc:
                print(f"{label}: {exc}")
                return False, 0, True
        result = replay(spool, transports[url], timeout=timeout, stop_on=(401,), on_batch=on_batch)
        line = f"{label}: sent {result.sent_events} events in {result.sent_batches} batches to {transports[url].url}"
        if result.rejections:
            line += (
                f"; {len(result.rejections)} batch(es), {result.rejected_events} events rejected: "
                f"{result.rejections[0]}"
            )
        print(line)
        if result.stopped is not None:
            print(f"{label}: stopped, the rest stays spooled: {result.stopped}")
            return False, result.sent_events, True
        spool.remove()
        return not result.rejections, result.sent_events, False
    finally:
        spool.close()
