"""``runcast export RUN``: download a run's raw points (or its samples or evaluations) as JSONL, CSV or
Parquet from a server."""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path
from typing import Any, BinaryIO, Final

import httpx

from runcast.cli.exits import EXIT_FAILED, UsageError, exit_status, server_message
from runcast.cli.progress import Bars, wanted
from runcast.importers import runcast_run_file
from runcast.wire.events import ID_RE

DEFAULT_SERVER = "http://127.0.0.1:8000"
FORMATS: Final = ("jsonl", "csv", "parquet")
WHAT: Final = ("metrics", "samples", "evals", "media")


def _stream_to(response: httpx.Response, out: BinaryIO, bars: Bars) -> int:
    total = 0
    bar = bars.task("export", total=None, unit="bytes")
    for chunk in response.iter_bytes():
        out.write(chunk)
        total += len(chunk)
        bars.advance(bar, len(chunk))
    bars.finish(bar, total)
    return total


HELP = ("Stream every point of RUN (rows: segment, key, step, value, time: the step's wall time), or its "
        "samples or evaluations, from the server; or write its media (images and a manifest) into a directory.")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("run", metavar="RUN", help="The run id.")
    parser.add_argument("--server", help=f"Runcast server address (env RUNCAST_SERVER; default {DEFAULT_SERVER}).")
    parser.add_argument("--token", help="Project token; needed for private runs (env RUNCAST_TOKEN).")
    parser.add_argument("--format", dest="fmt", type=str.lower, choices=FORMATS, default="jsonl", help="Output format.")
    parser.add_argument("--what", type=str.lower, choices=WHAT, default="metrics",
                        help="The points, the samples (one row each, every field whole), the evaluations, or the "
                             "media (with --output DIR: images/ and manifest.jsonl).")
    parser.add_argument("--key", help="Only this metric (with --what samples or media: this key).")
    parser.add_argument("--output", "-o", type=Path,
                        help="Write here instead of standard output (Parquet is binary: a file or a pipe); the points "
                             "as JSONL or CSV also write the run beside it (FILE.run.json), for runcast import.")
    parser.add_argument("--quiet", "-q", action="store_true", help="No progress bar (drawn only with --output).")


def run(args: argparse.Namespace) -> int:
    """Stream every point of RUN (rows: segment, key, step, value, time: the step's wall time), or its
    samples or evaluations, from the server; or write its media into a directory."""
    token = args.token or os.environ.get("RUNCAST_TOKEN") or None
    base = _checked(args)
    if args.what == "media":
        return _media(args, base, args.run, args.key, token)
    _check_points(args)
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    partial = args.output.with_name(args.output.name + ".part") if args.output else None
    try:
        described = None
        if args.output is not None and args.what == "metrics" and args.fmt != "parquet":  # runcast import reads it
            found = httpx.get(f"{base}/api/v1/runs/{args.run}", headers=headers, timeout=httpx.Timeout(30.0))
            if found.status_code >= 400:
                print(f"error: {found.url} answered {found.status_code}: {server_message(found)}", file=sys.stderr)
                return exit_status(found.status_code)
            described = runcast_run_file.describe(found.json())
        return _stream(args, base, headers, partial, described)
    except httpx.HTTPError as exc:
        print(f"error: could not export from {base}: {exc}", file=sys.stderr)
        return EXIT_FAILED
    finally:
        if partial is not None and partial.exists():
            partial.unlink()


def _checked(args: argparse.Namespace) -> str:
    """The server's address, after the checks every ``--what`` shares (UsageError naming the flag)."""
    if not ID_RE.match(args.run):
        raise UsageError("RUN", "must be 8-64 characters of A-Z, a-z, 0-9, '_' or '-'")
    base: str = (args.server or os.environ.get("RUNCAST_SERVER") or DEFAULT_SERVER).rstrip("/")
    if not base.startswith(("http://", "https://")):
        raise UsageError("--server", f"{base!r} is not an http:// or https:// address")
    if args.key is not None and not args.key:
        raise UsageError("--key", "must not be empty")
    return base


def _check_points(args: argparse.Namespace) -> None:
    """The checks of a points, samples or evaluations export."""
    if args.what != "metrics" and args.fmt == "csv":
        raise UsageError("--format", f"{args.what} export as jsonl or parquet")
    if args.what == "evals" and args.key is not None:
        raise UsageError("--key", "selects metrics or samples, not evaluations")
    if args.fmt == "parquet" and args.output is None and sys.stdout.isatty():
        raise UsageError("--output", "Parquet is binary: write it to a file with --output FILE")


def _stream(args: argparse.Namespace, base: str, headers: dict[str, str], partial: Path | None,
            described: dict[str, Any] | None) -> int:
    """The export streamed to standard output, or to ``--output`` through ``partial`` (and the run beside it)."""
    key, output, what = args.key, args.output, args.what
    params = {"format": args.fmt, **({"key": key} if key else {}), **({"what": what} if what != "metrics" else {})}
    url = f"{base}/api/v1/runs/{args.run}/export"
    with Bars(wanted(args.quiet) and output is not None) as bars, httpx.stream(
        "GET", url, params=params, headers=headers, timeout=httpx.Timeout(30.0)
    ) as response:
        if response.status_code >= 400:
            print(f"error: {url} answered {response.status_code}: {server_message(response)}", file=sys.stderr)
            return exit_status(response.status_code)
        if partial is None:
            _stream_to(response, sys.stdout.buffer, bars)
            sys.stdout.buffer.flush()
            return 0
        with partial.open("wb") as out:
            size = _stream_to(response, out, bars)
        partial.replace(output)
        print(f"wrote {size} bytes to {output}", file=sys.stderr)
        if described is not None:
            beside = runcast_run_file.path_for(output)
            beside.write_text(json.dumps(described, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
            print(f"wrote the run (name, config, summary, tags, times, segments) to {beside}", file=sys.stderr)
    return 0


def _media(args: argparse.Namespace, base: str, run: str, key: str | None, token: str | None) -> int:
    """``--what media``: the run's images and a manifest in ``--output DIR``."""
    from runcast.cli.export_media import ExportFailed, export_media

    if args.output is None:
        raise UsageError("--output", "--what media writes files: give the directory, --output DIR")
    if args.output.exists() and not args.output.is_dir():
        raise UsageError("--output", f"{args.output} is not a directory")
    if args.fmt != "jsonl":
        raise UsageError("--format", "media export writes its images and a manifest.jsonl")
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    try:
        with Bars(wanted(args.quiet)) as bars, httpx.Client(headers=headers, timeout=httpx.Timeout(30.0)) as client:
            rows = export_media(client, base, run, key, args.output, bars)
    except ExportFailed as exc:
        print(f"error: {exc}", file=sys.stderr)
        return exit_status(exc.status) if exc.status else EXIT_FAILED
    except (httpx.HTTPError, OSError) as exc:
        print(f"error: could not export media from {base}: {exc}", file=sys.stderr)
        return EXIT_FAILED
    print(f"wrote {rows} media rows to {args.output / 'manifest.jsonl'}", file=sys.stderr)
    return 0
