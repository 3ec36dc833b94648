"""The overflow: a run's queue continued on disk, written by the training thread itself.

When the in-memory queue is full, or its oldest event has waited longer than the
sender should ever let it (the sender is behind: a slow server, a huge checkpoint to
hash), ``Run.log`` appends the event to ``overflow.bin`` in the run segment's spool
directory instead of dropping it, and keeps doing so, to keep the order, until the
sender has read back everything written. The sender reads the file after the queue,
in order, and sends (or spools) its events like any others.

The training thread never waits on the disk for long: records collect in memory and
go to the file with one ``write`` per ``WRITE_EVERY`` records; the sender also writes
what collected whenever it reads, and fsyncs the file on its own schedule. After a
crash the file and ``overflow.offset`` (the byte offset of the first record the sender
has not shipped, replaced atomically) let ``runcast sync`` send the rest.

A record is ``(seq, type, ts, step, body)`` as the run queued it (device tensors
read), in ``marshal``'s format (``FORMAT``: ten times cheaper than JSON, which matters
on the training thread), framed by a 4-byte little-endian length. The file is private
to the run (mode 0600) and read back only by this process or by ``runcast sync`` of
the same installation (the spool's ``meta.json`` names the format).
"""

from __future__ import annotations

import contextlib
import marshal
import os
import struct
import threading
from collections import deque
from pathlib import Path
from typing import Any, Final, NamedTuple

from ..wire.events import SCHEMA_VERSION, encode_value

FILE: Final = "overflow.bin"
OFFSET: Final = "overflow.offset"
FORMAT: Final = f"marshal-{marshal.version}"
WRITE_EVERY: Final = 256  # records the training thread collects before one write()
_LENGTH: Final = struct.Struct("<I")

Record = tuple[int, str, float, "int | None", Any]


class Cursor(NamedTuple):
    """A place in an episode's file: the record's number (from the episode's first), its byte offset."""

    record: int
    offset: int
    episode: int

    def after(self, records: int, size: int) -> Cursor:
        """The cursor past ``records`` records of ``size`` bytes read from this one."""
        return Cursor(self.record + records, self.offset + size, self.episode)


class Overflow:
    """One segment's overflow file. ``open``, ``put`` and ``try_close`` belong to the training thread;
    ``cursor``, ``mark_shipped`` and ``sync`` to the sender; ``read`` to the sender or its helper
    thread (a read ahead); ``write`` may be called by any of them."""

    def __init__(self, directory: Path) -> None:
        self.directory = Path(directory)
        self._path = self.directory / FILE
        self._lines: deque[bytes] = deque()
        self._lock = threading.Lock()
        self._fd: int | None = None
        self.written = 0  # records in the file
        self.shipped = 0  # records the sender has shipped
        self._read_pos = 0  # byte offset of the first record not shipped
        self._size = 0  # bytes of whole records in the file
        self._synced = True
        self.failed = 0  # records lost because the file could not be written (disk full)
        self._episode = 0  # counts the episodes that ended (a cursor of an earlier one reads nothing)

    # --- the training thread ---------------------------------------------------------------

    def open(self) -> None:
        """Start (or continue) an episode: the file is created if needed."""
        with self._lock:
            if self._fd is None:
                self._fd = os.open(self._path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)

    def put(self, record: Record) -> bool:
        """Append one record (written with the next ``WRITE_EVERY``); True when this call wrote."""
        data = marshal.dumps(record)
        self._lines.append(_LENGTH.pack(len(data)) + data)
        if len(self._lines) >= WRITE_EVERY:
            self.write()
            return True
        return False

    def try_close(self) -> bool:
        """End the episode if the sender has shipped everything written: True, and the
        file is gone; the run may queue in memory again."""
        if self._lines or self.shipped < self.written:
            return False  # the usual answer, without the lock
        with self._lock:
            if self._lines or self.shipped < self.written or self._fd is None:
                return False
            os.close(self._fd)
            self._fd = None
            self._episode += 1
            self.written = self.shipped = self._read_pos = self._size = 0
            self._synced = True
            for name in (FILE, OFFSET):
                with contextlib.suppress(FileNotFoundError):
                    (self.directory / name).unlink()
            return True

    # --- either thread ------------------------------------------------------------------------

    def write(self) -> None:
        """Write the collected records to the file (one ``write``)."""
        with self._lock:
            n = len(self._lines)
            if not n or self._fd is None:
                return
            data = b"".join(self._lines.popleft() for _ in range(n))
            try:
                view = memoryview(data)
                while view:
                    view = view[os.write(self._fd, view):]
            except OSError:
                # Cut what this write left (half a record would hide the ones after it);
                # its records are lost, and counted.
                with contextlib.suppress(OSError):
                    os.ftruncate(self._fd, self._size)
                self.failed += n
                return
            self.written += n
            self._size += len(data)
            self._synced = False

    # --- the sender ------------------------------------------------------------------------------

    def pending(self) -> int:
        """Records written or collected and not shipped yet."""
        return self.written - self.shipped + len(self._lines)

    def cursor(self) -> Cursor:
        """Where the first record not shipped yet lies (``read`` reads from a cursor)."""
        with self._lock:
            return Cursor(self.shipped, self._read_pos, self._episode)

    def read(self, cursor: Cursor, max_records: int) -> tuple[list[Record], int]:
        """Up to ``max_records`` records from ``cursor`` on, and their size in bytes (for ``mark_shipped``).

        A cursor past records read but not shipped yet (``Cursor.after``) reads ahead, on any
        thread: those records keep the episode open (``try_close`` waits for them) until shipped.
        """
        self.write()
        with self._lock:
            available, fd = self.written - cursor.record, self._fd
            if cursor.episode != self._episode:
                available = 0
        if available <= 0 or fd is None:
            return [], 0
        with open(self._path, "rb") as handle:
            handle.seek(cursor.offset)
            return _parse(handle, min(available, max_records))

    def mark_shipped(self, records: int, size: int) -> None:
        """``records`` read by ``read`` (``size`` bytes) were sent or spooled.

        The offset is on disk before ``shipped`` moves, so ``try_close`` (which needs
        everything shipped) never deletes the files under this write.
        """
        _write_offset(self.directory / OFFSET, self._read_pos + size)
        with self._lock:
            self.shipped += records
            self._read_pos += size

    def sync(self) -> None:
        """fsync what was written (the sender calls this once per flush interval)."""
        with self._lock:
            fd, synced = self._fd, self._synced
            self._synced = True
        if fd is not None and not synced:
            with contextlib.suppress(OSError):
                os.fsync(fd)


def leftover(directory: Path) -> tuple[list[Record], Path] | None:
    """After a crash: the records of ``directory``'s overflow the sender had not shipped."""
    path = Path(directory) / FILE
    if not path.is_file():
        return None
    try:
        start = int((Path(directory) / OFFSET).read_text().strip() or 0)
    except (FileNotFoundError, ValueError):
        start = 0
    with open(path, "rb") as handle:
        handle.seek(start)
        records, _ = _parse(handle, None)  # a record torn by the crash ends the list
    return records, path


def _parse(handle: Any, limit: int | None) -> tuple[list[Record], int]:
    """Up to ``limit`` whole records from ``handle``'s position, and the bytes they take."""
    records: list[Record] = []
    used = 0
    while limit is None or len(records) < limit:
        head = handle.read(_LENGTH.size)
        if len(head) < _LENGTH.size:
            break
        (size,) = _LENGTH.unpack(head)
        data = handle.read(size)
        if len(data) < size:
            break
        try:
            records.append(marshal.loads(data))
        except (ValueError, EOFError, TypeError):
            break
        used += _LENGTH.size + size
    return records, used


def to_wire(record: Record, run: str, segment: str) -> dict[str, Any] | None:
    """A leftover record as the wire event the sender would have sent (``runcast sync``).

    The sender's side work never ran for it: a checkpoint keeps the path it was logged
    with (or the copy it pruned) and has no sha256. None for a metrics record left empty.
    """
    seq, kind, ts, step, body = record
    if kind == "metrics":
        if not body:
            return None
        body = {"step": step, "values": {k: encode_value(v) for k, v in body.items()}}
    else:
        body = {k: v for k, v in body.items() if not k.startswith("_")}
    return {"v": SCHEMA_VERSION, "type": kind, "run": run, "segment": segment, "seq": seq, "ts": ts, **body}


def remove(directory: Path) -> None:
    """Delete an overflow's files (after ``runcast sync`` sent them)."""
    for name in (FILE, OFFSET, OFFSET + ".tmp"):
        with contextlib.suppress(FileNotFoundError):
            (Path(directory) / name).unlink()


def _write_offset(path: Path, position: int) -> None:
    tmp = path.with_name(path.name + ".tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    try:
        os.write(fd, f"{position}\n".encode())
        os.fsync(fd)
    finally:
        os.close(fd)
    os.replace(tmp, path)
