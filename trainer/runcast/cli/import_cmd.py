"""``runcast import PATH...``: other tools' finished runs as Runcast runs (``runcast.importers``)."""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from runcast.cli.exits import EXIT_FAILED, EXIT_REFUSED, UsageError, exit_status
from runcast.cli.progress import Bars, wanted
from runcast.handshake import DEFAULT_START_TIMEOUT, Identity, InitError, whoami
from runcast.importers.registry import FORMATS
from runcast.wire.events import VISIBILITIES

if TYPE_CHECKING:
    from runcast.importers.model import SourceRun
    from runcast.importers.plan import Plan
    from runcast.importers.send import Limits

HELP = "Import finished runs from TensorBoard, MLflow, W&B, training logs or Runcast exports."


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.description = (
        f"{HELP} Every PATH is read and checked before anything is sent; importing the same source "
        "again changes nothing (an interrupted import resumes). See docs/import.md."
    )
    parser.add_argument("sources", nargs="+", metavar="PATH",
                        help="Files, directories (TensorBoard logdir, wandb/, mlruns) or an MLflow tracking URI.")
    parser.add_argument("--format", dest="fmt", type=str.lower, choices=list(FORMATS),
                        help="Read every PATH as this format (default: recognised per PATH).")
    parser.add_argument("--project", help="Project the runs go to (env RUNCAST_PROJECT; default: the token's).")
    parser.add_argument("--name", help="Run name (default: the source's); with several runs, a prefix: NAME:<source name>.")
    parser.add_argument("--visibility", type=str.lower, choices=VISIBILITIES, default="public",
                        help="Who may read the imported runs.")
    parser.add_argument("--alerts", action=argparse.BooleanOptionalAction, default=True,
                        help="Run the alert detectors on the imported points.")
    parser.add_argument("--events", type=Path, help="Training logs: events JSON to show as notes (default: FILE's .events.json).")
    parser.add_argument("--experiment", action="append", help="MLflow: only this experiment (name or id); repeatable.")
    parser.add_argument("--server", help="Runcast server URL (env RUNCAST_SERVER).")
    parser.add_argument("--token", help="Project ingest token (env RUNCAST_TOKEN).")
    parser.add_argument("--quiet", "-q", action="store_true", help="No progress bars.")


def run(args: argparse.Namespace) -> int:
    """Import the runs of every PATH: read and check them all, then send."""
    from runcast import importers

    server = args.server or os.environ.get("RUNCAST_SERVER") or None
    token = args.token or os.environ.get("RUNCAST_TOKEN") or None
    if not server:
        raise UsageError("--server", "needs a server: --server or RUNCAST_SERVER")
    if not server.startswith(("http://", "https://")):
        raise UsageError("--server", f"{server!r} is not an http:// or https:// address")
    project = args.project or os.environ.get("RUNCAST_PROJECT") or None
    who: Identity | None = None
    if project is None:  # the token's: the run ids are made from it, so it is asked before anything is read
        found = _token_identity(server, token)
        if isinstance(found, int):
            return found
        who, project = found, found.project
    try:
        runs, plans, stored, held = _read_and_send(args, server, token, project, who)
    except (importers.ImportFailed, importers.SendFailed) as exc:
        print(f"error: {exc}", file=sys.stderr)
        status = getattr(exc, "status", None)
        return exit_status(status) if status else EXIT_FAILED
    _report(runs, plans, stored, held)
    return 0


def _token_identity(server: str, token: str | None) -> Identity | int:
    """The server's answer for the token (its project, its batch limits); or the exit status, the reason printed."""
    try:
        who = whoami(server, token, None, DEFAULT_START_TIMEOUT, warn_unreachable=False)
    except InitError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return EXIT_REFUSED
    if who is None:
        print(f"error: cannot learn the token's project from {server} (unreachable, or a server that does "
              "not say): pass --project", file=sys.stderr)
        return EXIT_FAILED
    return who


def _limits(server: str, token: str | None, who: Identity | None) -> Limits:
    """The batches the server takes (``whoami``): when it does not say, or refuses the token, what every
    server takes (the first batch's refusal then says why, after every source was read)."""
    from runcast.importers.send import Limits

    if who is None:
        try:
            who = whoami(server, token, None, DEFAULT_START_TIMEOUT, warn_unreachable=False)
        except InitError:
            who = None
    return Limits.of(who)


def _read_and_send(args: argparse.Namespace, server: str, token: str | None, project: str,
                   who: Identity | None) -> tuple[list[SourceRun], list[Plan], list[int], list[int | None]]:
    """Read and check every source, then send the plans: the runs, the plans, each plan's points and
    what the server held of them before (``_held``). Raises ImportFailed or SendFailed."""
    from runcast import importers
    from runcast.sender.blob_http import BlobClient
    from runcast.sender.transport import make_transport

    progress = Bars(wanted(args.quiet))
    target = importers.Target(project=project, visibility=args.visibility, alerts=args.alerts)
    with progress:
        reading = progress.task("reading", total=None)
        options = importers.ReadOptions(
            events_path=args.events, experiments=tuple(args.experiment or ()), on_points=lambda n: progress.advance(reading, n)
        )
        runs = importers.read_all(args.sources, args.fmt, options)
        plans = importers.plan_all(runs, target, name=args.name)
        total = sum(run.points for run in runs)
        progress.finish(reading, total)
        if total == 0 and not any(run.outputs for run in runs):
            raise importers.ImportFailed(
                ", ".join(args.sources),
                "no points to import; nothing was sent" + ("" if args.fmt else " (is --format right?)"),
            )
        stored = [plan.points() for plan in plans]  # the source's points and the elapsed times derived from them
        held = _held(server, token, plans)  # of those, what the server holds already (a repeated import)
        sending = progress.task("sending", total=sum(stored))
        transport = make_transport(server, token)
        blobs = BlobClient(server, token) if any(plan.blobs for plan in plans) else None
        try:
            importers.send(plans, transport, blobs=blobs, limits=_limits(server, token, who),
                           on_batch=lambda batch: progress.advance(sending, batch.points))
        finally:
            transport.close()
            if blobs is not None:
                blobs.close()
    return runs, plans, stored, held


def _report(runs: list[SourceRun], plans: list[Plan], stored: list[int], held: list[int | None]) -> None:
    """A line per run, then the totals (points the server held before are not counted again)."""
    known = [old is not None for old in held]  # runs the server held before: their outputs may be stored already
    olds = [old or 0 for old in held]
    for plan, points, old, was in zip(plans, stored, olds, known):
        print(f"run {plan.run_id}  {plan.name}: {points - old} points{_outputs(plan.run.outputs, was)}, "
              f"{len(plan.run.segments)} segment(s){_already(old)}")
    repeats = sum(run.repeats for run in runs)
    print(
        f"imported {sum(stored) - sum(olds)} points{_outputs(sum(r.outputs for r in runs), any(known))} as "
        f"{len(plans)} run(s), {sum(len(r.segments) for r in runs)} segment(s), {sum(len(r.notes) for r in runs)} note(s)"
        + _already(sum(olds)) + (f"; {repeats} repeated point(s) left out" if repeats else "")
    )


def _held(server: str, token: str | None, plans: list[Plan]) -> list[int | None]:
    """Each plan's points the server holds already: None for a run it does not know, 0 where it does not say
    (the send then tells why)."""
    import httpx

    from runcast.importers.stored import StoredUnknown, already_stored

    headers = {"Authorization": f"Bearer {token}"} if token else {}
    held: list[int | None] = []
    with httpx.Client(headers=headers) as client:
        for plan in plans:
            try:
                held.append(already_stored(client, server, plan))
            except (httpx.HTTPError, StoredUnknown, ValueError):
                held.append(0)
    return held


def _already(count: int) -> str:
    return f"; {count} point(s) already stored" if count else ""


def _outputs(count: int, sent_again: bool = False) -> str:
    if not count:
        return ""
    return f" and {count} sample(s) and media" + (" sent (the server keeps each once)" if sent_again else "")
