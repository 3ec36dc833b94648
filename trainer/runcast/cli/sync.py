"""``runcast sync DIR``: send the batches that runs left in their local spools.

Spools are replayed oldest first (so a resumed run's segments stay in order), each
from its recorded offset; what a crashed run left in its overflow file is sent after
its spooled batches. Batches leave at most as large as the server takes (its
``max_batch_events`` and ``max_body_bytes``; split again, and halved while it answers "too large").

Images a run kept in its spool (``blobs/``, the server away) are stored on the server before
the events that show them; an image the server refuses for good leaves its event out of the
batch, set aside as refused (the image stays). Nothing is deleted that the server did not store: a batch it refuses for good is set
aside in the spool's ``refused.jsonl`` with the server's answer, the spool stays, the
command says so and exits 1; ``--retry-refused`` sends those batches again. A spool whose
every batch was stored is deleted. The command stops at the first batch the server
cannot take now (unreachable, busy, or a token it refuses), keeping what is left for
the next try. After each spool it tells the server how many of the segment's events are
still waiting (0, or the refused ones), shown on the run's page. A DIRECTORY that does not
exist is bad input (exit 2); the default directory missing means nothing was ever
spooled (exit 0).
"""

from __future__ import annotations

import argparse
import os
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from runcast.cli.exits import UsageError
from runcast.cli.progress import Bars, wanted
from runcast.handshake import InitError, whoami
from runcast.sender.blob_http import BlobClient
from runcast.sender.renames import Renames
from runcast.sender.spool import REFUSED, Spool, SpoolBusy, absorb_overflow, default_dir, find_spools
from runcast.sender.spool_replay import replay
from runcast.sender.spool_report import report_spooled
from runcast.sender.transport import Transport, make_transport
from runcast.wire.limits import COMPATIBLE_BATCH_EVENTS, MAX_BATCH_BYTES

HELP = "Replay every spool found under DIRECTORY, in order, and report what was sent."
STOP_ON = (401, 403)  # the token, not the data: stop without setting anything aside


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "directory", nargs="?", type=Path, metavar="DIRECTORY",
        help="A spool, or a folder holding spools (default: RUNCAST_SPOOL_DIR or ~/.cache/runcast/spool).",
    )  # fmt: skip
    parser.add_argument("--server", help="Send here instead of the URL each spool recorded (env RUNCAST_SERVER).")
    parser.add_argument("--token", help="Project ingest token, never stored in the spool (env RUNCAST_TOKEN).")
    parser.add_argument("--timeout", type=float, default=10.0, help="Seconds to wait for each batch.")
    parser.add_argument("--retry-refused", action="store_true",
                        help=f"Send again the batches the server refused before (kept in each spool's {REFUSED}).")
    parser.add_argument("--quiet", "-q", action="store_true", help="No progress bar.")


@dataclass
class _Server:
    """One server the spools go to: its transport, where images go, and the most events it takes in a batch."""

    url: str
    transport: Transport
    blobs: BlobClient
    max_events: int
    max_bytes: int
    renames: Renames  # whether it took the run renames sent to it so far


@dataclass(frozen=True)
class _Outcome:
    stored: bool  # every event of the spool is on the server
    sent: int
    stop: bool  # stop the whole sync (the server or the token, not this spool)


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
    servers: dict[str, _Server] = {}
    total = 0
    complete = True
    with Bars(wanted(args.quiet)) as bars:
        bar = bars.task("sync", total=None, unit="events")
        try:
            for path in paths:
                outcome = _sync_one(path, server, token, args, servers, lambda n: bars.advance(bar, n))
                total += outcome.sent
                complete = complete and outcome.stored
                if outcome.stop:
                    break
        finally:
            for known in servers.values():
                known.transport.close()
                known.blobs.close()
    print(f"sent {total} events from {len(paths)} spool(s)" + ("" if complete else "; some were not sent"))
    return 0 if complete else 1


def _sync_one(
    path: Path,
    server: str | None,
    token: str | None,
    args: argparse.Namespace,
    servers: dict[str, _Server],
    on_batch: Callable[[int], None],
) -> _Outcome:
    """Replay one spool."""
    try:
        spool = Spool.open(path)
    except SpoolBusy:
        print(f"{path}: in use by a running process; skipped")
        return _Outcome(False, 0, False)
    try:
        meta = spool.meta
        project = meta.get("project") or "the token's project"  # None: resolved by the server from the token
        label = f"{path.name} ({project}/{meta.get('name')})"
        url = server or meta.get("url")
        if not url:
            print(f"{label}: no server recorded; pass --server")
            return _Outcome(False, 0, False)
        try:
            absorb_overflow(spool)  # what a crashed run left on disk beyond its queue
        except ValueError as exc:
            print(f"{label}: {exc}")
            return _Outcome(False, 0, False)
        if args.retry_refused and (again := spool.retry_refused()):
            print(f"{label}: {again} refused batch(es) queued again")
        try:
            target = servers.get(url) or servers.setdefault(url, _connect(url, token, args.timeout))
        except (ValueError, InitError) as exc:
            print(f"{label}: {exc}")
            return _Outcome(False, 0, True)
        result = replay(spool, target.transport, timeout=args.timeout, max_events=target.max_events,
                        max_bytes=target.max_bytes, stop_on=STOP_ON, keep_refused=True, on_batch=on_batch,
                        blobs=target.blobs, renames=target.renames)
        print(f"{label}: sent {result.sent_events} events in {result.sent_batches} batches to {target.url}")
        if result.stopped is not None:
            print(f"{label}: stopped, the rest stays spooled: {result.stopped}")
            return _Outcome(False, result.sent_events, True)
        refused_batches, refused_events = spool.refused()
        if refused_batches:
            first = result.rejections[0] if result.rejections else "refused by an earlier sync"
            print(f"{label}: the server refused {refused_batches} batch(es), {refused_events} events: {first}. "
                  f"They are kept in {path / REFUSED}; send them again with: "
                  f"runcast sync --retry-refused {path}")
        report_spooled(url, token, meta["run"], meta["segment"], refused_events)
        spool.remove()  # kept, emptied, while it holds refused batches
        return _Outcome(not refused_batches, result.sent_events, False)
    finally:
        spool.close()


def _connect(url: str, token: str | None, timeout: float) -> _Server:
    """The transport to ``url`` and the batch size it takes (``whoami``; 1000 when it does not say)."""
    transport = make_transport(url, token)  # ValueError for an address it cannot send to
    try:
        identity = whoami(url, token, None, timeout, warn_unreachable=False)  # the replay says why
    except InitError:
        transport.close()
        raise
    blobs = BlobClient(url, token, timeout)
    if identity is None:  # a server that does not say: what every server takes
        return _Server(url=transport.url, transport=transport, blobs=blobs, max_events=COMPATIBLE_BATCH_EVENTS,
                       max_bytes=MAX_BATCH_BYTES, renames=Renames(transport.url))
    return _Server(url=transport.url, transport=transport, blobs=blobs, max_events=identity.max_batch_events,
                   max_bytes=identity.max_batch_bytes, renames=Renames(transport.url))
