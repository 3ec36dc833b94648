"""A run's outbox: the bounded in-memory queue its verbs append to, and its overflow.

The training thread only appends numbered items (``seq``) and, when the queue is full
or the sender has fallen behind, writes them to the overflow file instead
(``overflow.py``), in order, until the sender has read all of it back. The sender
thread (``thread.py``) is the only consumer; ``Counters`` and ``Wakeup`` are what the
two threads share.
"""

from __future__ import annotations

import contextlib
import itertools
import logging
import queue
from collections import deque
from dataclasses import dataclass
from typing import Any

from ..values import read_deferred
from .overflow import Overflow

log = logging.getLogger("runcast")

Item = tuple[int, str, float, "int | None", Any]  # (seq, type, ts, step, values or body)


@dataclass
class Counters:
    """Event counts shared by a run and its sender (see ``RunStats``).

    Each field has one writer, so no lock is needed: ``logged``, ``spilled`` and
    ``dropped_full`` are written by the training thread, the others by the sender.
    """

    logged: int = 0
    sent: int = 0
    spooled: int = 0
    dropped: int = 0
    dropped_full: int = 0
    replayed: int = 0
    spilled: int = 0


class Wakeup:
    """Wakes the sender early. Uses no Python-level lock, so a signal handler that
    interrupts the training thread in the middle of ``set`` can call it again safely.

    ``pending`` lets the training thread skip ``set`` while a wake-up is already on its
    way. ``wait`` clears it only after draining the tokens: cleared first, a ``set``
    between the two would leave ``pending`` true with no token, and the next events
    would wait for the sender's timeout.
    """

    __slots__ = ("_tokens", "pending")

    def __init__(self) -> None:
        self._tokens: queue.SimpleQueue[None] = queue.SimpleQueue()
        self.pending = False

    def set(self) -> None:
        self.pending = True
        self._tokens.put(None)

    def wait(self, timeout: float) -> None:
        with contextlib.suppress(queue.Empty):
            self._tokens.get(timeout=timeout)
        while True:
            try:
                self._tokens.get_nowait()
            except queue.Empty:
                break
        self.pending = False


class Outbox:
    """The queue of one run segment, with its event numbers, counters and overflow file."""

    def __init__(self, run_id: str, *, flush_interval: float, batch_size: int, max_queue: int) -> None:
        self.run_id = run_id
        self.queue: deque[Item] = deque()
        self.seq = itertools.count()  # the segment's event numbers, shared with the sender (heartbeats)
        self.wake = Wakeup()
        self.counters = Counters()
        self.overflow: Overflow | None = None  # set once the run's spool directory exists
        self._wake_at = batch_size if flush_interval > 0 else 1  # the queue length that wakes the sender
        self._max_queue = max_queue
        self._spilling = False  # an overflow episode is open: events go to disk, in order
        self._spill_after = max(2.0, 2 * flush_interval)  # the oldest queued event's age that starts one
        self._full_warned = False

    def put(self, kind: str, ts: float, step: int | None, body: Any, *, final: bool = False) -> None:
        """Append one event (to the overflow file while the sender is behind); ``final``: the
        finished event, which gets in even when the queue is full."""
        items = self.queue
        if self._spilling:
            # Stay on disk until the sender has read back all of it: the order is kept.
            assert self.overflow is not None  # an episode opens only with an overflow file
            if not self.overflow.try_close():
                self._spill(kind, ts, step, body)
                return
            self._spilling = False
        elif len(items) >= self._max_queue or self._behind(items, ts):
            if self._start_spilling():
                self._spill(kind, ts, step, body)
                return
            if len(items) >= self._max_queue and not final:  # the finished event always gets in
                self.counters.dropped_full += 1
                if not self.wake.pending:
                    self.wake.set()  # the sender reports the hole at once
                if not self._full_warned:
                    self._full_warned = True
                    log.warning(
                        "runcast: the event queue of run %s is full (max_queue=%d) and the overflow file cannot "
                        "be written: events are being dropped; run.stats.dropped counts them",
                        self.run_id,
                        self._max_queue,
                    )
                return
        items.append((next(self.seq), kind, ts, step, body))
        self.counters.logged += 1
        if len(items) >= self._wake_at and not self.wake.pending:
            self.wake.set()

    def lost(self) -> int:
        """Events that will never reach the service (rejected, or not writable to disk)."""
        c = self.counters
        failed = self.overflow.failed if self.overflow is not None else 0
        return c.dropped + c.dropped_full + failed

    def _behind(self, items: deque[Item], ts: float) -> bool:
        """The oldest queued event has waited longer than the sender should ever let it."""
        try:
            return ts - items[0][2] > self._spill_after
        except IndexError:  # empty (the sender may take the last item while we look)
            return False

    def _start_spilling(self) -> bool:
        """Open an overflow episode (the sender is behind); False if the disk refuses."""
        overflow = self.overflow
        if overflow is None:
            return False
        try:
            overflow.open()
        except OSError as exc:
            if not self._full_warned:
                self._full_warned = True
                log.error("runcast: cannot write the overflow file in %s (%s)", overflow.directory, exc)
            return False
        self._spilling = True
        return True

    def _spill(self, kind: str, ts: float, step: int | None, body: Any) -> None:
        """Write one event to the overflow file (a device tensor is read now: the queue is behind)."""
        if kind == "metrics":
            body = read_deferred(body)
        overflow = self.overflow
        assert overflow is not None
        c = self.counters
        c.logged += 1
        c.spilled += 1
        if overflow.put((next(self.seq), kind, ts, step, body)) and not self.wake.pending:
            self.wake.set()
