"""The local spool: batches that could not be sent yet, kept on disk until they are.

One directory per run segment (``<spool_dir>/<run>.<segment>/``) holds:

* ``meta.json`` - run, segment, project, name, the transport URL (never a token), creation time;
* ``batches.jsonl`` - append-only, one wire batch (``events.dumps_batch``) per line, each
  append flushed and fsync'd before it counts as spooled;
* ``offset`` - the byte offset of the first batch not yet acknowledged, replaced
  atomically (write, fsync, rename) after each acknowledged batch, so a crash during
  replay resends at most one batch (the service is idempotent);
* ``refused.jsonl`` - batches the service refused for good during ``runcast sync``, set aside
  (never deleted) one per line with the service's answer:
  ``{"refused_at", "status", "error", "events", "batch"}``; ``runcast sync --retry-refused``
  puts them back in the queue;
* ``blobs/<sha256>`` - images the server did not hold yet, written durably before the events
  that show them were queued; stored on the server before those events are sent (``spool_blobs``);
* ``lock`` - held (``flock``) by whoever writes or replays the spool.

A spool is deleted once everything in it was stored, and never while it holds a refused batch.
Batches are sent at most as large as the service takes: a line holding more events than the
service's limit (a spool written for another server, or by an older SDK) is split at send time,
and a part the service still finds too large (413, or 422 on ``events``) is halved again.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import shutil
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any, Final, cast

from ..wire.columns import expand_columns
from . import overflow
from .batches import batch_bodies
from .transport import Rejected

try:
    import fcntl
except ImportError:  # pragma: no cover - Windows: no cross-process lock
    fcntl = None  # type: ignore[assignment]

log = logging.getLogger("runcast")

BATCHES: Final = "batches.jsonl"
OFFSET: Final = "offset"
META: Final = "meta.json"
LOCK: Final = "lock"
REFUSED: Final = "refused.jsonl"
BLOBS: Final = "blobs"


def default_dir() -> Path:
    """``$RUNCAST_SPOOL_DIR``, else ``~/.cache/runcast/spool``."""
    env = os.environ.get("RUNCAST_SPOOL_DIR")
    return Path(env).expanduser() if env else Path.home() / ".cache" / "runcast" / "spool"


class SpoolBusy(RuntimeError):
    """Another process holds the spool (a run still writing it, or another sync)."""


class Spool:
    """One segment's unsent batches. Not thread-safe: one owner at a time."""

    def __init__(self, path: Path, lock_fd: int) -> None:
        self.path = path
        self._lock_fd = lock_fd
        self._batches = path / BATCHES
        self._offset = _read_offset(path / OFFSET)
        self._fd: int | None = None

    @classmethod
    def create(cls, root: Path, meta: dict[str, Any]) -> Spool:
        """Open (creating if needed) the spool of ``meta['run']``/``meta['segment']`` under ``root``."""
        path = Path(root) / f"{meta['run']}.{meta['segment']}"
        path.mkdir(parents=True, exist_ok=True)
        spool = cls(path, _lock(path))
        if not (path / META).exists():
            _write_atomic(path / META, json.dumps(meta, indent=1).encode())
        return spool

    @classmethod
    def create_or_warn(cls, root: Path, meta: dict[str, Any]) -> Spool | None:
        """``create``, or None (logged) when the disk or another process refuses."""
        try:
            return cls.create(root, meta)
        except (OSError, SpoolBusy) as exc:
            log.warning("runcast: cannot prepare the spool under %s (%s)", root, exc)
            return None

    @classmethod
    def open(cls, path: Path) -> Spool:
        """Open an existing spool directory; SpoolBusy if someone else holds it."""
        path = Path(path)
        if not (path / META).is_file():
            raise FileNotFoundError(f"{path} is not a runcast spool (no {META})")
        return cls(path, _lock(path))

    @property
    def meta(self) -> dict[str, Any]:
        return cast("dict[str, Any]", json.loads((self.path / META).read_bytes()))  # written by create(): an object

    def append(self, body: bytes) -> None:
        """Add one batch at the end, durably."""
        if self._fd is None:
            self._fd = os.open(self._batches, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
        os.write(self._fd, body + b"\n")
        os.fsync(self._fd)

    def pending(self) -> Iterator[tuple[bytes, list[dict[str, Any]], int]]:
        """Unacknowledged batches in order: (body, events, offset after it); skips unreadable lines."""
        try:
            handle = open(self._batches, "rb")  # noqa: SIM115  (closed by the with below; only opening may miss)
        except FileNotFoundError:
            return
        with handle:
            handle.seek(self._offset)
            position = self._offset
            for line in handle:
                if not line.endswith(b"\n"):
                    return  # a torn final write: never acknowledged as spooled
                position += len(line)
                body = line[:-1]
                try:
                    events = expand_columns(json.loads(body)["events"])
                except (ValueError, KeyError, TypeError):
                    log.warning("runcast: skipping an unreadable line in %s", self._batches)
                    self.ack(position)
                    continue
                yield body, events, position

    def ack(self, offset: int) -> None:
        """Everything before ``offset`` was delivered (or can never be)."""
        _write_atomic(self.path / OFFSET, f"{offset}\n".encode())
        self._offset = offset

    def is_done(self) -> bool:
        """No complete batch is left to send."""
        return next(self.pending(), None) is None

    def set_aside(self, body: bytes, count: int, refusal: Rejected) -> None:
        """Keep a batch the service refused, with its answer, in ``refused.jsonl`` (durably)."""
        head = json.dumps({"refused_at": time.time(), "status": refusal.status, "error": str(refusal), "events": count})
        _append(self.path / REFUSED, head[:-1].encode() + b',"batch":' + body + b"}\n")

    def refused(self) -> tuple[int, int]:
        """Batches and events set aside as refused (``set_aside``)."""
        batches = events = 0
        for doc in _refused_lines(self.path / REFUSED):
            batches += 1
            events += int(doc.get("events") or 0)
        return batches, events

    def retry_refused(self) -> int:
        """Queue the refused batches again, after the pending ones; returns how many."""
        lines = list(_refused_lines(self.path / REFUSED))
        for doc in lines:
            self.append(json.dumps(doc["batch"], separators=(",", ":"), ensure_ascii=False).encode())
        with contextlib.suppress(FileNotFoundError):
            (self.path / REFUSED).unlink()
        return len(lines)

    def reset(self) -> None:
        """Everything was delivered: empty the spool, keep the directory (and the lock)."""
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None
        for name in (BATCHES, OFFSET, OFFSET + ".tmp"):
            with contextlib.suppress(FileNotFoundError):
                (self.path / name).unlink()
        self._offset = 0

    def remove(self) -> None:
        """Delete the spool directory (after everything was stored) and release it; a spool holding
        refused batches is emptied and kept (``reset``)."""
        if (self.path / REFUSED).exists():
            self.reset()
            self.close()
            return
        self.close()
        shutil.rmtree(self.path / BLOBS, ignore_errors=True)  # stored before the events that needed them
        for name in (BATCHES, OFFSET, META, OFFSET + ".tmp", META + ".tmp", LOCK):
            with contextlib.suppress(FileNotFoundError):
                (self.path / name).unlink()
        with contextlib.suppress(OSError):
            self.path.rmdir()

    def close(self) -> None:
        """Release the file handles and the lock; the files stay."""
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None
        if self._lock_fd >= 0:
            os.close(self._lock_fd)
            self._lock_fd = -1


def absorb_overflow(spool: Spool) -> int:
    """Move what a crashed run left in its overflow file into the spool's batches; returns events moved.

    The records become wire events as the sender would have made them (a checkpoint
    keeps its original path and gets no sha256: the sender's copy and hash never ran).
    """
    found = overflow.leftover(spool.path)
    if found is None:
        return 0
    meta = spool.meta
    if meta.get("overflow", overflow.FORMAT) != overflow.FORMAT:
        raise ValueError(
            f"{spool.path}: the overflow file was written as {meta.get('overflow')}, this runcast reads "
            f"{overflow.FORMAT}: run `runcast sync` with the Python that ran the training"
        )
    records, _ = found
    wire = [e for e in (overflow.to_wire(r, meta["run"], meta["segment"]) for r in records) if e is not None]
    for body, _events in batch_bodies(wire):  # at most MAX_BATCH_EVENTS each; split again at send time if need be
        spool.append(body)
    overflow.remove(spool.path)
    return len(wire)


def find_spools(root: Path) -> list[Path]:
    """Every spool directory at or under ``root``, oldest first (segments of a run stay in order)."""
    root = Path(root)
    found = [p.parent for p in root.rglob(META)] if root.is_dir() else []
    if (root / META).is_file() and root not in found:
        found.append(root)

    def created(path: Path) -> tuple[float, str]:
        try:
            return float(json.loads((path / META).read_bytes()).get("created", 0.0)), str(path)
        except (OSError, ValueError, TypeError, AttributeError):
            return 0.0, str(path)

    return sorted(set(found), key=created)


def _append(path: Path, line: bytes) -> None:
    _write_synced(path, line, os.O_WRONLY | os.O_APPEND | os.O_CREAT)


def _write_synced(path: Path, data: bytes, flags: int) -> None:
    fd = os.open(path, flags, 0o600)
    try:
        os.write(fd, data)
        os.fsync(fd)
    finally:
        os.close(fd)


def _refused_lines(path: Path) -> Iterator[dict[str, Any]]:
    """The readable lines of a ``refused.jsonl`` (a torn last line is skipped)."""
    try:
        handle = open(path, "rb")  # noqa: SIM115  (closed by the with below)
    except FileNotFoundError:
        return
    with handle:
        for line in handle:
            try:
                doc = json.loads(line)
            except ValueError:
                continue
            if isinstance(doc, dict) and isinstance(doc.get("batch"), dict):
                yield doc


def _lock(path: Path) -> int:
    fd = os.open(path / LOCK, os.O_RDWR | os.O_CREAT, 0o600)
    if fcntl is not None:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            os.close(fd)
            raise SpoolBusy(f"{path} is in use by another process") from None
    return fd


def _read_offset(path: Path) -> int:
    try:
        return max(0, int(path.read_text().strip() or 0))
    except (FileNotFoundError, ValueError):
        return 0


def _write_atomic(path: Path, data: bytes) -> None:
    tmp = path.with_name(path.name + ".tmp")
    _write_synced(tmp, data, os.O_WRONLY | os.O_CREAT | os.O_TRUNC)
    os.replace(tmp, path)
    _fsync_dir(path.parent)


def _fsync_dir(path: Path) -> None:
    with contextlib.suppress(OSError):
        fd = os.open(path, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)
