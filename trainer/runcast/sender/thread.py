"""The background flusher: the only consumer of a run's queue and of its overflow file.

The training thread appends queue items (numbered: ``seq``) and returns; this daemon thread
turns them into wire events (reading device tensors, hashing checkpoints), cuts batches (never
more than ``batch_size`` events or ``batch_bytes``: the server's limits) and hands them to the
transport; while one batch of a backlog is in flight, the next is encoded (``ahead.py``).
With ``flush_interval`` 0 (the default) it sends as soon as it is idle: what arrives
while a request is in flight (or before its next send slot: ``slots.py``) goes out together in
the next one, so batches grow with the load. A positive ``flush_interval`` waits that long (or
for ``batch_size`` events) instead. The overflow file (``overflow.py``) is read after the queue.

When the service is unavailable the batch goes to the spool and so does every later batch, so
order is kept (gathered for ``SPOOL_INTERVAL`` at a time: each append is fsync'd); the spool is
replayed after a capped exponential back-off with full jitter (``Backoff``) and live sending
resumes once it is empty. A batch the service finds too large is halved; one it rejects for good
is counted as dropped and its error logged once. The run's spool directory is made with the run
(the overflow file lives there) and deleted when the run closes with nothing left unsent.
"""

from __future__ import annotations

import logging
import random
import threading
import time
from collections import deque
from collections.abc import Callable, Sequence
from functools import partial
from pathlib import Path
from typing import Any, Final

from ..wire import events
from .ahead import fetched_ahead, pipelined
from .backoff import Backoff
from .batches import batch_bodies, batch_sizes, is_columnar, queued_points
from .blob_http import BlobClient
from .config import SenderConfig
from .encode import Encoded, encode_items
from .outbox import Counters, Item, Wakeup
from .overflow import Cursor, Overflow
from .renames import Renames
from .spool import Spool
from .spool_blobs import SPOOLED
from .spool_replay import replay
from .state import SenderState
from .transport import Rejected, Retryable, Transport

log = logging.getLogger("runcast")

DEFAULT_SEND_TIMEOUT: Final = 10.0
REPLAY_BATCHES_PER_PASS: Final = 32
OVERFLOW_BATCHES_PER_PASS: Final = 8
SPOOL_INTERVAL: Final = 1.0  # while spooling, batches gather this long (each spool append is fsync'd)
SYNC_INTERVAL: Final = 1.0  # how often the overflow file is fsync'd while it is written


class Sender:
    """Consume ``queue`` on a daemon thread until ``close``."""

    def __init__(
        self,
        config: SenderConfig,
        queue: deque[Item],
        wake: Wakeup,
        transport: Transport | None,
        counters: Counters,
        heartbeat: Callable[[], Item],
        overflow: Overflow | None = None,
        lost: Callable[[], int] | None = None,
        spool: Spool | None = None,
        rng: random.Random | None = None,
        blobs: BlobClient | None = None,  # stores the spool's images before the events showing them (replay)
        on_commands: Callable[[list[dict[str, Any]]], None] | None = None,  # the team's commands in an answer
    ) -> None:
        self._on_commands = on_commands
        self.config = config
        self._queue = queue
        self._wake = wake
        self._transport = transport
        self._counters = counters
        self._heartbeat = heartbeat
        self._overflow = overflow
        self._blobs = blobs
        self._lost = lost or (lambda: counters.dropped + counters.dropped_full)
        self._backoff = Backoff(config.retry_initial, config.retry_max, rng or random.Random())
        self._renames = Renames(transport.url if transport is not None else "?")
        # the spool is made by the run, so its directory exists from the start
        self.state = SenderState(spooling=transport is None, spool=spool)
        self._thread = threading.Thread(target=self._main, name=f"runcast-sender-{config.run}", daemon=True)

    # --- the training thread's side ------------------------------------------------

    def start(self) -> None:
        self._thread.start()

    def flush(self, timeout: float | None) -> bool:
        """Ship everything queued so far (sent or spooled); True if nothing is left unsent."""
        with self.state.cond:
            self.state.requested += 1
            ticket = self.state.requested
        self._wake.set()
        with self.state.cond:
            self.state.cond.wait_for(lambda: self.state.served >= ticket or not self._thread.is_alive(), timeout)
        return not self._queue and not self._overflow_pending() and not self.state.spooling

    def close(self, timeout: float) -> bool:
        """Send what is queued within ``timeout`` seconds, spool the rest, stop the thread.

        Returns True if everything was delivered.
        """
        self.state.deadline = time.monotonic() + timeout
        self._wake.set()
        self._thread.join(timeout + 2.0)
        if self._thread.is_alive():
            log.warning("runcast: the sender did not stop within %.1f s; %d queued events may be lost", timeout,
                        len(self._queue))
            return False
        return self.unsent_dir is None

    @property
    def offline(self) -> bool:
        """No transport: every batch goes to the spool, for ``runcast sync``."""
        return self._transport is None

    @property
    def unsent_dir(self) -> Path | None:
        """The spool directory still holding unsent events after ``close``, if any."""
        if self.state.spool is None or not (self.state.spooling or self._overflow_pending()):
            return None
        return self.state.spool.path

    @property
    def unsent_events(self) -> int:
        """Events left on disk for ``runcast sync`` (the spool's and the overflow file's), after ``close``."""
        return self.state.spooled_events + self._overflow_pending() if self.unsent_dir is not None else 0

    def _overflow_pending(self) -> int:
        return self._overflow.pending() if self._overflow is not None else 0

    # --- the sender thread ------------------------------------------------------------

    def _interval(self) -> float:
        """How long events gather before a send (0: none)."""
        return max(self.config.flush_interval, SPOOL_INTERVAL) if self.state.spooling else self.config.flush_interval

    def _main(self) -> None:
        st = self.state
        st.last_flush = st.last_sync = time.monotonic()
        st.next_heartbeat = st.last_flush + self.config.heartbeat_interval
        while True:
            self._wake.wait(self._wait_time())
            with st.cond:
                serving = st.requested
            now = time.monotonic()
            closing = st.deadline is not None
            due = closing or serving > st.served
            try:
                due = self._pass(now, closing, due)
            except Exception:  # the sender must outlive any bug
                log.exception("runcast: internal error in the sender thread")
                self._wake.wait(0.5)  # never a busy loop of errors
            if due:
                st.last_flush = now
                if closing or not (self._queue or self._overflow_pending()):
                    with st.cond:
                        st.served = serving
                        st.cond.notify_all()
            if closing and not self._queue and self._finished_closing():
                break
        self._shutdown()

    def _pass(self, now: float, closing: bool, due: bool) -> bool:
        """Replay the spool when it is time, send what is due (and a heartbeat), then the overflow file.
        True when a flush was due (``due``, the interval passed, or a heartbeat)."""
        st = self.state
        if st.spooling and st.spool is None:
            st.spooling = self._transport is None  # the spool could not be written: go live
        if st.spooling and self._transport is not None and now >= st.retry_at:
            self._replay()
        interval = self._interval()
        due = due or (now - st.last_flush >= interval if interval > 0 else st.slots.wait(now) == 0.0)
        beat = self._heartbeat_due(now, closing)
        self._send_queue(now, due or beat, beat)  # a heartbeat goes after everything queued before it
        if not self._queue and self._overflow is not None:
            self._ship_overflow(self._overflow, closing)
            if closing or now - st.last_sync >= SYNC_INTERVAL:
                st.last_sync = now
                self._overflow.sync()
        return due or beat

    def _heartbeat_due(self, now: float, closing: bool) -> bool:
        """A heartbeat is due: its interval passed, or events were lost since the last one (reported at once)."""
        st, lost = self.state, self._lost()
        beat = not closing and not st.spooling and (now >= st.next_heartbeat or lost > st.lost_reported)
        if beat:
            st.next_heartbeat = now + self.config.heartbeat_interval
            st.lost_reported = lost
        return beat

    def _send_queue(self, now: float, due: bool, beat: bool) -> None:
        """Ship the queue: all of it when due, else only whole batches; then the heartbeat. A backlog
        of several batches is pipelined (``ahead.pipelined``): delivery stays here, in order."""
        available = len(self._queue)
        take = available if due else available - available % self.config.batch_size
        if take:
            self.state.slots.take(now)
        last = [self._heartbeat()] if beat else []  # after everything queued before it
        self._counters.logged += beat
        sizes = batch_sizes(take, self._batch_limit(), beat, partial(queued_points, self._queue))
        pipelined(self._queue, sizes, last, self._encode, self._deliver_encoded)

    def _ship_overflow(self, overflow: Overflow, closing: bool) -> None:
        """Send (or spool) a few batches of the overflow file in order, each read and encoded ahead (``ahead``);
        past a closing run's deadline the rest stays in the file, for `runcast sync`."""
        size = self._batch_limit()

        def fetch(at: Cursor) -> tuple[tuple[list[Item], int, Encoded], Cursor] | None:
            records, used = overflow.read(at, size)
            items = [(r[0], r[1], r[2], r[3], r[4]) for r in records]
            return ((items, used, self._encode(items)), at.after(len(items), used)) if items else None

        def ship(page: tuple[list[Item], int, Encoded]) -> None:
            items, used, encoded = page
            self._deliver_encoded(items, encoded)
            overflow.mark_shipped(len(items), used)

        fetched_ahead(fetch, overflow.cursor(), OVERFLOW_BATCHES_PER_PASS, ship,
                      lambda: not (closing and self._past_deadline()))

    def _wait_time(self) -> float:
        now, last_flush, next_heartbeat = time.monotonic(), self.state.last_flush, self.state.next_heartbeat
        if self.state.deadline is not None:
            if self._queue or self._overflow_pending() or not self.state.spooling or self._transport is None \
                    or now >= self.state.deadline:
                return 0.0
            return max(0.0, min(self.state.retry_at, self.state.deadline) - now)
        if self._overflow is not None and self._overflow.written > self._overflow.shipped:
            return 0.0  # a backlog on disk: keep going
        until = next_heartbeat
        interval = self._interval()
        if interval > 0:
            until = min(until, last_flush + interval)
        elif self._queue:  # arrived while we were sending: the next batch leaves now, or at the gap's end
            return self.state.slots.wait(now)
        if self.state.spooling and self._transport is not None:
            until = min(until, self.state.retry_at)
        return max(0.0, until - now)

    def _finished_closing(self) -> bool:
        assert self.state.deadline is not None
        if time.monotonic() >= self.state.deadline:
            return True
        if self._overflow_pending():
            return False
        return not self.state.spooling or self._transport is None

    def _shutdown(self) -> None:
        with self.state.cond:
            self.state.served = self.state.requested
            self.state.cond.notify_all()
        if self._overflow is not None:
            self._overflow.write()
            self._overflow.sync()
            self._overflow.try_close()  # nothing left in it: its file goes (the training thread is done)
        if self.state.spool is not None:
            if self.state.spooling or self._overflow_pending():
                self.state.spool.close()
            else:
                self.state.spool.remove()
        if self._transport is not None:
            self._transport.close()

    # --- batches ----------------------------------------------------------------------

    def _encode(self, items: list[Item]) -> Encoded:
        """Runs on a helper thread while the batch before is delivered: it changes no state."""
        return encode_items(items, self.config, self._renames, self._past_deadline, self._batch_limit())

    def _deliver_encoded(self, items: list[Item], encoded: Encoded) -> None:
        bodies, unreadable = encoded
        if unreadable:
            self._drop(unreadable)
        if not self.state.spooling and any(item[1] == "media" and SPOOLED in item[4] for item in items):
            self.state.spooling = True  # an image waits in the spool: the replay stores it before its event
            self._schedule_retry(None)
        for body, batch in bodies:
            self._deliver(body, batch)

    def _deliver(self, body: bytes, batch: Sequence[dict[str, Any]]) -> None:
        if self.state.spooling or self._past_deadline():
            self._to_spool(body, len(batch))
            return
        assert self._transport is not None
        try:
            commands = self._transport.send(body, batch, self._send_timeout())
        except Retryable as exc:
            self._start_outage(exc)
            self._to_spool(body, len(batch))
        except Rejected as exc:
            if is_columnar(body) and exc.status == 422 and not exc.too_large:  # a server that does not take columns after all
                self._deliver(events.dumps_batch(list(batch)), batch)
                return
            # The server takes less than it said: halve, never drop. An old server refused a rename: the rest goes.
            # A command acknowledgement it refused (the command expired meanwhile): the rest goes.
            halve = exc.too_large and len(batch) > 1
            kept = batch if halve else self._renames.retry(batch, exc) if exc.field != "command" else (
                [e for i, e in enumerate(batch) if i != exc.index] if exc.index is not None and len(batch) > 1 else None)
            if kept is None:
                self._rejected(str(exc), len(batch))
                return
            for part_body, part in batch_bodies(kept, len(batch) // 2 if halve else self._batch_limit(),
                                                self.config.batch_bytes):
                self._deliver(part_body, part)
        else:
            self._counters.sent += len(batch)
            if commands and self._on_commands is not None:
                self._on_commands(commands)

    def _to_spool(self, body: bytes, count: int) -> None:
        try:
            if self.state.spool is None:
                self.state.spool = Spool.create(self.config.spool_dir, self.config.spool_meta)
            if self._transport is None and self.state.first("offline"):
                log.warning("runcast: the run is recorded offline; spooling events to %s", self.state.spool.path)
            self.state.spool.append(body)
        except OSError as exc:
            if self.state.first("spool_error"):
                log.error("runcast: cannot write the spool under %s (%s); events are dropped", self.config.spool_dir,
                          exc)
            self._drop(count)
            return
        self.state.spooling = True
        self.state.spooled_events += count
        self._counters.spooled += count

    def _start_outage(self, exc: Retryable) -> None:
        self.state.spooling = True
        self._schedule_retry(exc.retry_after)
        if self.state.first("outage"):
            log.warning("runcast: cannot reach %s (%s); spooling to %s/%s.%s and retrying",
                        self._transport.url if self._transport else "?", exc, self.config.spool_dir, self.config.run,
                        self.config.segment)

    def _schedule_retry(self, hint: float | None) -> None:
        self.state.retry_at = time.monotonic() + self._backoff.next(hint)

    def _replay(self) -> None:
        assert self.state.spool is not None and self._transport is not None
        result = replay(self.state.spool, self._transport, timeout=self._send_timeout(),
                        max_batches=REPLAY_BATCHES_PER_PASS, max_events=self._batch_limit(),
                        max_bytes=self.config.batch_bytes, blobs=self._blobs, blob_wait=2.0, renames=self._renames,
                        on_commands=self._on_commands)  # a command the server counts delivered is held here
        self.state.spooled_events = max(0, self.state.spooled_events - result.sent_events - result.rejected_events)
        self._counters.sent += result.sent_events
        self._counters.replayed += result.sent_events
        for message in result.rejections:
            self._rejected(message, 0)
        if result.rejected_events:
            self._drop(result.rejected_events)
        if result.stopped is not None:
            self._schedule_retry(result.retry_after)
        elif result.done:
            log.info("runcast: %s is reachable again; the spool was replayed", self._transport.url)
            self.state.spool.reset()
            self.state.spooled_events = 0
            self.state.spooling = False
            self._backoff.reset()
            self.state.told.discard("outage")
        else:
            self.state.retry_at = 0.0  # more to replay: continue on the next pass

    def _drop(self, count: int) -> None:
        self._counters.dropped += count

    def _rejected(self, message: str, count: int) -> None:
        if count:
            self._drop(count)
        if self.state.first("rejected"):
            log.error("runcast: the service rejected a batch; its events are dropped: %s", message)
        else:
            log.debug("runcast: batch rejected: %s", message)

    def _batch_limit(self) -> int:
        """The most events one batch holds: ``batch_size`` (already cut to what the server takes)."""
        return min(self.config.batch_size, events.MAX_BATCH_EVENTS)

    def _past_deadline(self) -> bool:
        return self.state.deadline is not None and time.monotonic() >= self.state.deadline

    def _send_timeout(self) -> float:
        if self.state.deadline is None:
            return DEFAULT_SEND_TIMEOUT
        return max(0.05, min(DEFAULT_SEND_TIMEOUT, self.state.deadline - time.monotonic()))
