"""``runcast download RUN CHECKPOINT``: fetch a checkpoint file, resuming and verifying it.

A directory checkpoint is fetched file by file into ``DIR/<name>/``, each file as below.

The file is written to ``DIR/<name>.part`` first, with ``DIR/<name>.part.json``
beside it holding the ETag (the server's sha256) the bytes belong to. A broken
transfer is resumed from the partial file's size with ``Range: bytes=<size>-`` and
``If-Range: <etag>``: when the server's file is still the same it sends only the
missing bytes (206), otherwise the whole file (200) and the partial is started over.
Transfers that break are retried (``--retries``); a later ``runcast download`` of
the same checkpoint into the same directory resumes the partial file too.

At the end the sha256 of the whole file is compared with the one the trainer
recorded: on a match the partial is renamed to ``DIR/<name>``; on a mismatch it is
deleted (or kept with ``--keep-partial``) and the command exits with status 1.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import httpx

from runcast.cli.exits import (
    EXIT_FAILED,
    EXIT_NOT_FOUND,
    EXIT_REFUSED,
    EXIT_USAGE,
    UsageError,
    exit_status,
)
from runcast.cli.progress import Bars, wanted
from runcast.wire.events import ID_RE

if TYPE_CHECKING:
    from _hashlib import HASH

DEFAULT_SERVER = "http://127.0.0.1:8000"
CHUNK = 1024 * 1024


class DownloadError(Exception):
    """A download that cannot finish; the message says why and what to do. ``exit_code``:
    the command's exit status (``runcast.cli.exits``)."""

    def __init__(self, message: str, exit_code: int = EXIT_FAILED) -> None:
        super().__init__(message)
        self.exit_code = exit_code


@dataclass
class DownloadResult:
    path: Path
    size: int
    sha256: str
    verified: bool  # False when the server had no sha256 to compare with
    resumed_from: int  # bytes already on disk when the first request of this call was sent
    received: int  # body bytes received over the network by this call
    requests: int


def _error_message(response: httpx.Response) -> str:
    try:
        text = response.read().decode(errors="replace")
    except httpx.HTTPError:
        return response.reason_phrase
    try:
        return str(json.loads(text)["error"]["message"])
    except (ValueError, KeyError, TypeError):
        return text.strip()[:300] or response.reason_phrase


def find_checkpoint(checkpoints: list[dict[str, Any]], wanted: str) -> dict[str, Any]:
    """The checkpoint named by ``wanted``: its id, ``step:N`` (newest segment first), or ``latest``."""
    if wanted == "latest":
        available = [c for c in checkpoints if c.get("status") == "available" and c.get("download_url")]
        if not available:
            raise DownloadError("the run has no downloadable checkpoint", EXIT_NOT_FOUND)
        return max(available, key=lambda c: (c["step"], c["segment"]))
    if wanted.startswith("step:") and wanted[5:].isdigit():
        step = int(wanted[5:])
        found = [c for c in checkpoints if c["step"] == step]
        if not found:
            raise DownloadError(f"the run has no checkpoint at step {step}", EXIT_NOT_FOUND)
        available = [c for c in found if c.get("status") == "available"] or found
        if len({c.get("filename") for c in available}) > 1:  # the same file saved again (a resume) is not a choice
            listed = "".join(f"\n  {c['id']}  {c.get('filename')}  ({c.get('size')} bytes, segment {c['segment']})"
                             for c in sorted(available, key=lambda c: c["id"]))
            raise DownloadError(f"{len(available)} checkpoints at step {step}; download one by its id "
                                f"(runcast download RUN ID):{listed}", EXIT_USAGE)
        return max(found, key=lambda c: (c.get("status") == "available", c["segment"], c["id"]))
    if wanted.isdigit():
        for c in checkpoints:
            if c["id"] == int(wanted):
                return c
        raise DownloadError(f"the run has no checkpoint {wanted} (see GET /api/v1/runs/RUN/checkpoints)", EXIT_NOT_FOUND)
    raise DownloadError("CHECKPOINT must be a checkpoint id, step:N or latest", EXIT_USAGE)


def _safe_name(name: str, step: int) -> str:
    name = name.replace("\\", "/").rsplit("/", 1)[-1].replace("\x00", "")
    if name in ("", ".", "..") or name.startswith("."):
        name = f"checkpoint-{step}" + (name if name not in ("", ".", "..") else "")
    return name


def download(
    server: str,
    run: str,
    checkpoint: str,
    out_dir: str | os.PathLike[str] = ".",
    *,
    token: str | None = None,
    retries: int = 5,
    keep_partial: bool = False,
    overwrite: bool = False,
    progress: bool = False,
    log: Any = None,
    client: httpx.Client | None = None,
) -> DownloadResult:
    """Download ``checkpoint`` of ``run`` into ``out_dir``; raises DownloadError. A file already there that is
    not the checkpoint's (another sha256, or none recorded to tell) is replaced only with ``overwrite``."""
    say = log or (lambda message: None)
    base = server.rstrip("/")
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    own = client is None
    http = client or httpx.Client(timeout=httpx.Timeout(60.0, connect=10.0), headers=headers)
    try:
        listing = http.get(f"{base}/api/v1/runs/{run}/checkpoints", headers=headers)
        if listing.status_code != 200:
            raise DownloadError(
                f"{base} answered {listing.status_code}: {_error_message(listing)}", exit_status(listing.status_code)
            )
        chosen = find_checkpoint(listing.json()["checkpoints"], checkpoint)
        if chosen["status"] != "available" or not chosen.get("download_url"):
            why = chosen.get("reason") or ("it is a directory" if chosen.get("kind") == "directory" else "")
            raise DownloadError(
                f"checkpoint {chosen['id']} (step {chosen['step']}) is {chosen['status']}"
                + (f": {why}" if why else "")
                + (" (pass --token with a token of the run's project)" if chosen["status"] == "private" else ""),
                EXIT_REFUSED if chosen["status"] == "private" else EXIT_NOT_FOUND,
            )
        expected: str | None = chosen.get("sha256")
        size: int = chosen["size"]
        out = Path(out_dir)
        out.mkdir(parents=True, exist_ok=True)
        if chosen.get("kind") == "directory" and chosen.get("files_url"):
            tree = out / _safe_name(chosen["filename"], chosen["step"])
            return _fetch_tree(http, base, chosen["files_url"], headers, tree, retries, keep_partial, progress, say,
                               overwrite)
        dest = out / _safe_name(chosen["filename"], chosen["step"])
        part = dest.with_name(dest.name + ".part")
        meta = dest.with_name(dest.name + ".part.json")
        url = f"{base}{chosen['download_url']}"
        if dest.exists() and expected and dest.stat().st_size == size and _file_sha256(dest) == expected:
            say(f"{dest} is already downloaded and verified")
            return DownloadResult(dest, size, expected, True, size, 0, 0)
        _may_replace(dest, expected, overwrite)
        return _fetch(http, url, headers, part, meta, dest, size, expected, retries, keep_partial, progress, say)
    except httpx.HTTPError as exc:
        raise DownloadError(f"could not reach {base}: {exc}") from exc
    finally:
        if own:
            http.close()


def _may_replace(dest: Path, expected: str | None, overwrite: bool) -> None:
    """Refuse to write over ``dest`` (known not to be the checkpoint's file) unless ``overwrite``."""
    if dest.exists() and not overwrite:
        why = "is a different file" if expected else "may be a different file (the checkpoint has no sha256 to tell)"
        raise DownloadError(f"{dest} exists and {why}: pass --overwrite to replace it, or --output another directory",
                            EXIT_USAGE)


def _file_sha256(path: Path, upto: int | None = None) -> str:
    return _hash_prefix(path, upto).hexdigest()


def _hash_prefix(path: Path, upto: int | None = None) -> HASH:
    digest = hashlib.sha256()
    left = upto
    with open(path, "rb") as f:
        while left is None or left > 0:
            chunk = f.read(CHUNK if left is None else min(CHUNK, left))
            if not chunk:
                break
            digest.update(chunk)
            if left is not None:
                left -= len(chunk)
    return digest


def _read_meta(meta: Path) -> dict[str, Any]:
    try:
        data = json.loads(meta.read_text())
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}  # not a sidecar this command wrote


def _fetch(
    http: httpx.Client,
    url: str,
    headers: dict[str, str],
    part: Path,
    meta: Path,
    dest: Path,
    size: int,
    expected: str | None,
    retries: int,
    keep_partial: bool,
    progress: bool,
    say: Any,
) -> DownloadResult:
    saved = _read_meta(meta)
    have = part.stat().st_size if part.exists() else 0
    if have and not saved.get("etag"):
        have = 0  # a partial file we know nothing about: start over
    resumed_from = have
    if have:
        say(f"resuming {part.name} from byte {have} of {size}")
    digest = _hash_prefix(part, have) if have else hashlib.sha256()
    received = requests = 0
    attempt = 0
    with Bars(progress) as bars:
        bar = bars.task(dest.name, total=size, unit="bytes", done=have)
        while True:
            request_headers = dict(headers)
            if have:
                request_headers["Range"] = f"bytes={have}-"
                request_headers["If-Range"] = saved["etag"]
            try:
                requests += 1
                # A server with S3 storage may redirect to a presigned URL of the bucket: Range and
                # If-Range go along, the token does not (httpx drops it for another origin).
                with http.stream("GET", url, headers=request_headers, follow_redirects=True) as response:
                    if response.status_code == 416 and have:
                        have, digest = 0, hashlib.sha256()  # the partial is longer than the file: start over
                        say("the partial file does not fit the server's file; starting over")
                        continue
                    if response.status_code not in (200, 206):
                        raise DownloadError(
                            f"{url} answered {response.status_code}: {_error_message(response)}",
                            exit_status(response.status_code),
                        )
                    etag = response.headers.get("etag")
                    if response.status_code == 206:
                        start = int(response.headers["content-range"].split(" ", 1)[1].split("-", 1)[0])
                        if start != have:
                            raise DownloadError(f"the server sent bytes from {start}, not {have}")
                        mode = "ab"
                    else:
                        if have:
                            say("the checkpoint changed on the server since the partial download; starting over")
                        have, digest, mode = 0, hashlib.sha256(), "wb"
                    saved = {"etag": etag, "url": url, "size": size}
                    meta.write_text(json.dumps(saved))
                    with open(part, mode) as f:
                        if mode == "ab":
                            f.truncate(have)
                        for chunk in response.iter_raw():  # no re-chunking: every byte received is kept
                            f.write(chunk)
                            digest.update(chunk)
                            have += len(chunk)
                            received += len(chunk)
                            bars.set(bar, have)
                if have < size:
                    raise httpx.RemoteProtocolError(f"the transfer ended at byte {have} of {size}")
                break
            except (httpx.TransportError, httpx.RemoteProtocolError) as exc:
                attempt += 1
                if attempt > retries:
                    raise DownloadError(
                        f"the transfer broke at byte {have} of {size} ({exc}); {part} is kept: "
                        "run the same command again to resume"
                    ) from exc
                say(f"the transfer broke at byte {have} of {size} ({exc}); resuming (attempt {attempt} of {retries})")
                time.sleep(min(0.2 * 2 ** (attempt - 1), 5.0))
    actual = digest.hexdigest()
    if expected and actual != expected:
        if keep_partial:
            where = f"the file is kept as {part}"
        else:
            part.unlink(missing_ok=True)
            where = "the partial file was deleted; run the command again to download it afresh"
        meta.unlink(missing_ok=True)
        raise DownloadError(f"sha256 mismatch: expected {expected}, got {actual}; {where}")
    os.replace(part, dest)
    meta.unlink(missing_ok=True)
    if not expected:
        say("the server recorded no sha256 for this checkpoint: the file is not verified")
    return DownloadResult(dest, have, actual, bool(expected), resumed_from, received, requests)


def _fetch_tree(
    http: httpx.Client, base: str, files_url: str, headers: dict[str, str], tree: Path, retries: int,
    keep_partial: bool, progress: bool, say: Any, overwrite: bool = False,
) -> DownloadResult:
    """A directory checkpoint, file by file (each resumable and verified) into ``tree``.

    The result's ``sha256`` is that of the listing (``<sha256>  <path>`` lines, as sha256sum
    writes them), so two downloads of the same tree can be compared at a glance.
    """
    listing = http.get(f"{base}{files_url}", headers=headers)
    if listing.status_code != 200:
        raise DownloadError(f"{base} answered {listing.status_code}: {_error_message(listing)}")
    files = listing.json()["files"]
    total = verified = resumed = received = requests = 0
    lines = []
    for entry in files:
        parts = str(entry["path"]).split("/")
        if any(p in ("", ".", "..") or "\\" in p or "\x00" in p for p in parts):
            raise DownloadError(f"the server listed an unsafe path {entry['path']!r}; nothing written for it")
        dest = tree.joinpath(*parts)
        dest.parent.mkdir(parents=True, exist_ok=True)
        part = dest.with_name(dest.name + ".part")
        meta = dest.with_name(dest.name + ".part.json")
        expected = entry.get("sha256")
        if dest.exists() and expected and dest.stat().st_size == entry["size"] and _file_sha256(dest) == expected:
            result = DownloadResult(dest, entry["size"], expected, True, entry["size"], 0, 0)
        else:
            _may_replace(dest, expected, overwrite)
            result = _fetch(http, f"{base}{entry['download_url']}", headers, part, meta, dest, entry["size"], expected,
                            retries, keep_partial, progress, say)
        total += result.size
        verified += result.verified
        resumed += result.resumed_from
        received += result.received
        requests += result.requests
        lines.append(f"{result.sha256}  {entry['path']}\n")
        say(f"{dest}  {result.size} bytes  sha256 {result.sha256}")
    digest = hashlib.sha256("".join(lines).encode()).hexdigest()
    return DownloadResult(tree, total, digest, verified == len(files), resumed, received, requests)


HELP = "Download a checkpoint of RUN: resumes a broken download, verifies the sha256, shows progress."


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("run", metavar="RUN", help="The run id.")
    parser.add_argument("checkpoint", metavar="CHECKPOINT",
                        help="Checkpoint id (from the run's checkpoint list), step:N, or latest.")
    parser.add_argument("--output", "-o", type=Path, default=Path("."), help="Directory to write the file to.")
    parser.add_argument("--server", help=f"Runcast server address (env RUNCAST_SERVER; default {DEFAULT_SERVER}).")
    parser.add_argument("--token", help="Project token; needed for private checkpoints (env RUNCAST_TOKEN).")
    parser.add_argument("--retries", type=int, default=5, help="Resume a broken transfer this many times.")
    parser.add_argument("--keep-partial", action="store_true",
                        help="Keep the file when its sha256 does not match (as NAME.part).")
    parser.add_argument("--overwrite", action="store_true",
                        help="Replace a file of the same name that is not this checkpoint's (refused otherwise).")
    parser.add_argument("--quiet", "-q", action="store_true", help="No progress bar.")


def run(args: argparse.Namespace) -> int:
    """Download a checkpoint of RUN: resumes a broken download, verifies the sha256, shows progress."""
    if not ID_RE.match(args.run):
        raise UsageError("RUN", "must be 8-64 characters of A-Z, a-z, 0-9, '_' or '-'")
    if args.retries < 0:
        raise UsageError("--retries", f"must be 0 or more, got {args.retries}")
    base = (args.server or os.environ.get("RUNCAST_SERVER") or DEFAULT_SERVER).rstrip("/")
    if not base.startswith(("http://", "https://")):
        raise UsageError("--server", f"{base!r} is not an http:// or https:// address")
    try:
        result = download(
            base,
            args.run,
            args.checkpoint,
            args.output,
            token=args.token or os.environ.get("RUNCAST_TOKEN") or None,
            retries=args.retries,
            keep_partial=args.keep_partial,
            overwrite=args.overwrite,
            progress=wanted(args.quiet),
            log=lambda message: print(message, file=sys.stderr),
        )
    except DownloadError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return exc.exit_code
    state = "verified" if result.verified else "NOT verified (no sha256 recorded)"
    print(f"{result.path}  {result.size} bytes  sha256 {result.sha256}  {state}")
    return 0
