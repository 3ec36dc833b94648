"""``runcast download RUN CHECKPOINT``: fetch a checkpoint file, resuming and verifying it.

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

import hashlib
import json
import os
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any

import httpx
import typer

from runcast.events import ID_RE

DEFAULT_SERVER = "http://127.0.0.1:8000"
CHUNK = 1024 * 1024


class DownloadError(Exception):
    """A download that cannot finish; the message says why and what to do."""


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
            raise DownloadError("the run has no downloadable checkpoint")
        return max(available, key=lambda c: (c["step"], c["segment"]))
    if wanted.startswith("step:") and wanted[5:].isdigit():
        step = int(wanted[5:])
        found = [c for c in checkpoints if c["step"] == step]
        if not found:
            raise DownloadError(f"the run has no checkpoint at step {step}")
        return max(found, key=lambda c: (c.get("status") == "available", c["segment"], c["id"]))
    if wanted.isdigit():
        for c in checkpoints:
            if c["id"] == int(wanted):
                return c
        raise DownloadError(f"the run has no checkpoint {wanted} (see GET /api/v1/runs/RUN/checkpoints)")
    raise DownloadError("CHECKPOINT must be a checkpoint id, step:N or latest")


def _safe_name(name: str, step: int) -> str:
    name = name.replace("\\", "/").rsplit("/", 1)[-1].replace("\x00", "")
    if name in ("", ".", "..") or name.startswith("."):
        name = f"checkpoint-{step}" + (name if name not in ("", ".", "..") else "")
    return name


class _Progress:
    """A rich progress bar when standard error is a terminal (and rich is installed), else nothing."""

    def __init__(self, enabled: bool, name: str, total: int) -> None:
        self._bar = None
        if not enabled:
            return
        try:
            from rich.progress import (
                BarColumn,
                DownloadColumn,
                Progress,
                TimeRemainingColumn,
                TransferSpeedColumn,
            )
        except ImportError:
            return
        self._bar = Progress(
            "[progress.description]{task.description}",
            BarColumn(),
            DownloadColumn(),
            TransferSpeedColumn(),
            TimeRemainingColumn(),
            transient=False,
        )
        self._task = self._bar.add_task(name, total=total)

    def __enter__(self) -> _Progress:
        if self._bar is not None:
            self._bar.start()
        return self

    def __exit__(self, *exc: object) -> None:
        if self._bar is not None:
            self._bar.stop()

    def set(self, done: int) -> None:
        if self._bar is not None:
            self._bar.update(self._task, completed=done)


def download(
    server: str,
    run: str,
    checkpoint: str,
    out_dir: str | os.PathLike[str] = ".",
    *,
    token: str | None = None,
    retries: int = 5,
    keep_partial: bool = False,
    progress: bool = False,
    log: Any = None,
    client: httpx.Client | None = None,
) -> DownloadResult:
    """Download ``checkpoint`` of ``run`` into ``out_dir``; raises DownloadError."""
    say = log or (lambda message: None)
    base = server.rstrip("/")
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    own = client is None
    http = client or httpx.Client(timeout=httpx.Timeout(60.0, connect=10.0), headers=headers)
    try:
        listing = http.get(f"{base}/api/v1/runs/{run}/checkpoints", headers=headers)
        if listing.status_code != 200:
            raise DownloadError(f"{base} answered {listing.status_code}: {_error_message(listing)}")
        chosen = find_checkpoint(listing.json()["checkpoints"], checkpoint)
        if chosen["status"] != "available" or not chosen.get("download_url"):
            why = chosen.get("reason") or ("it is a directory" if chosen.get("kind") == "directory" else "")
            raise DownloadError(
                f"checkpoint {chosen['id']} (step {chosen['step']}) is {chosen['status']}"
                + (f": {why}" if why else "")
                + (" (pass --token with a token of the run's project)" if chosen["status"] == "private" else "")
            )
        expected: str | None = chosen.get("sha256")
        size: int = chosen["size"]
        out = Path(out_dir)
        out.mkdir(parents=True, exist_ok=True)
        dest = out / _safe_name(chosen["filename"], chosen["step"])
        part = dest.with_name(dest.name + ".part")
        meta = dest.with_name(dest.name + ".part.json")
        url = f"{base}{chosen['download_url']}"
        if dest.exists() and expected and dest.stat().st_size == size and _file_sha256(dest) == expected:
            say(f"{dest} is already downloaded and verified")
            return DownloadResult(dest, size, expected, True, size, 0, 0)
        return _fetch(http, url, headers, part, meta, dest, size, expected, retries, keep_partial, progress, say)
    except httpx.HTTPError as exc:
        raise DownloadError(f"could not reach {base}: {exc}") from exc
    finally:
        if own:
            http.close()


def _file_sha256(path: Path, upto: int | None = None) -> str:
    return _hash_prefix(path, upto).hexdigest()


def _hash_prefix(path: Path, upto: int | None = None) -> Any:
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
        return json.loads(meta.read_text())
    except (OSError, ValueError):
        return {}


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
    with _Progress(progress, dest.name, size) as bar:
        bar.set(have)
        while True:
            request_headers = dict(headers)
            if have:
                request_headers["Range"] = f"bytes={have}-"
                request_headers["If-Range"] = saved["etag"]
            try:
                requests += 1
                with http.stream("GET", url, headers=request_headers) as response:
                    if response.status_code == 416 and have:
                        have, digest = 0, hashlib.sha256()  # the partial is longer than the file: start over
                        say("the partial file does not fit the server's file; starting over")
                        continue
                    if response.status_code not in (200, 206):
                        raise DownloadError(f"{url} answered {response.status_code}: {_error_message(response)}")
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
                            bar.set(have)
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


def download_command(
    run: Annotated[str, typer.Argument(help="The run id.", metavar="RUN", show_default=False)],
    checkpoint: Annotated[
        str, typer.Argument(help="Checkpoint id (from the run's checkpoint list), step:N, or latest.", metavar="CHECKPOINT")
    ],
    output: Annotated[Path, typer.Option("--output", "-o", help="Directory to write the file to.")] = Path("."),
    server: Annotated[
        str | None, typer.Option(help=f"Runcast server address (env RUNCAST_SERVER; default {DEFAULT_SERVER}).")
    ] = None,
    token: Annotated[
        str | None,
        typer.Option(envvar="RUNCAST_TOKEN", help="Project token; needed for private checkpoints.", show_default=False),
    ] = None,
    retries: Annotated[int, typer.Option(min=0, help="Resume a broken transfer this many times.")] = 5,
    keep_partial: Annotated[
        bool, typer.Option("--keep-partial", help="Keep the file when its sha256 does not match (as NAME.part).")
    ] = False,
    quiet: Annotated[bool, typer.Option("--quiet", "-q", help="No progress bar.")] = False,
) -> None:
    """Download a checkpoint of RUN: resumes a broken download, verifies the sha256, shows progress."""
    if not ID_RE.match(run):
        raise typer.BadParameter("must be 8-64 characters of A-Z, a-z, 0-9, '_' or '-'", param_hint="RUN")
    base = (server or os.environ.get("RUNCAST_SERVER") or DEFAULT_SERVER).rstrip("/")
    if not base.startswith(("http://", "https://")):
        raise typer.BadParameter(f"{base!r} is not an http:// or https:// address", param_hint="--server")
    try:
        result = download(
            base,
            run,
            checkpoint,
            output,
            token=token,
            retries=retries,
            keep_partial=keep_partial,
            progress=not quiet and sys.stderr.isatty(),
            log=lambda message: typer.echo(message, err=True),
        )
    except DownloadError as exc:
        typer.echo(f"error: {exc}", err=True)
        raise typer.Exit(1) from exc
    state = "verified" if result.verified else "NOT verified (no sha256 recorded)"
    typer.echo(f"{result.path}  {result.size} bytes  sha256 {result.sha256}  {state}")
