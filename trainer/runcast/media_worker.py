"""The media worker: a thread of its own that prepares ``media`` events off the training thread.

``run.log`` hands it each image or histogram (a snapshot, ``media.Media.snapshot``) with the
event's number, reserved on the training thread. The worker encodes the image (or bins the
histogram), hashes it and, for an image, asks the server whether it holds the bytes (``HEAD``)
and sends them when it does not (``PUT``, paced by ``upload_bandwidth``); only then is the event
appended to the run's queue, where the sender finds it. The metrics path never waits for it.

When the server cannot be reached (or the run is offline), the image is written durably into
the run's spool (``spool_blobs``) and its event is queued marked ``SPOOLED``: the sender spools it
(and the events after it), and whoever replays the spool stores the image before the event.
After a failure the worker spools without asking the server until a back-off has passed. Data
that cannot be made into an event (an image that does not encode, bytes the server refuses) is
logged once per key, counted in ``MediaStats.failed``, and the run goes on.
"""

from __future__ import annotations

import hashlib
import logging
import queue
import random
import threading
import time
from collections import deque
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

from .images import Encoded
from .media import Prepared
from .sender.backoff import Backoff
from .sender.blob_http import BlobClient, NotYet
from .sender.outbox import Item, Wakeup
from .sender.spool_blobs import SPOOLED, write_blob
from .sender.transport import Rejected, Retryable
from .wire.checks import EventError
from .wire.events import validate_event

log = logging.getLogger("runcast")

MAX_PENDING: Final = 32  # snapshots waiting for the worker; log() waits beyond (each may be large)
NOT_YET_WAIT: Final = 30.0  # how long an image waits for the server to store the run's start


@dataclass(frozen=True)
class MediaStats:
    """Images and histograms of a run (``run.stats.media``): ``pending`` (not prepared yet),
    ``queued`` (their events queued), ``uploaded`` (images sent to the server), ``spooled``
    (images written to the spool for a later replay), ``failed`` (left out: see the log)."""

    pending: int = 0
    queued: int = 0
    uploaded: int = 0
    spooled: int = 0
    failed: int = 0


@dataclass(frozen=True)
class Job:
    seq: int
    ts: float
    body: dict[str, Any]  # step, key, kind, caption
    prepare: Prepared


class _Failed(Exception):
    """This media event cannot be made or stored (the message says why)."""


class MediaWorker:
    """Prepares and uploads the media of one run segment, in the order given."""

    def __init__(self, *, run_id: str, segment: str, queue_: deque[Item], wake: Wakeup, blobs: BlobClient | None,
                 spool: Path | None, retry_initial: float, retry_max: float, bandwidth: float | None = None) -> None:
        self.run_id, self.segment = run_id, segment
        self._queue, self._wake = queue_, wake
        self._blobs, self._spool = blobs, spool
        self._bandwidth = bandwidth
        self._backoff = Backoff(retry_initial, retry_max, random.Random())
        self._outage_until = 0.0
        self._next_send = 0.0
        self._jobs: queue.Queue[Job | None] = queue.Queue()
        self._closing = threading.Event()
        self._settled = threading.Condition()
        self._submitted = self._done = 0
        self._queued = self._uploaded = self._spooled = self._failed = 0
        self._progress_at = time.monotonic()
        self._warned: set[str] = set()  # keys whose failure was logged (the worker's)
        self._behind_warned = self._outage_warned = False
        self._thread = threading.Thread(target=self._run, name=f"runcast-media-{run_id[:8]}", daemon=True)
        self._thread.start()

    # --- the training thread's side ------------------------------------------------------

    def submit(self, seq: int, ts: float, body: dict[str, Any], prepare: Prepared) -> None:
        """Queue one snapshot; waits while ``MAX_PENDING`` are waiting already (the worker is behind)."""
        with self._settled:
            if self._submitted - self._done >= MAX_PENDING:
                if not self._behind_warned:
                    self._behind_warned = True
                    log.warning("runcast: the media worker of run %s is behind; log() waits for it", self.run_id)
                self._settled.wait_for(lambda: self._submitted - self._done < MAX_PENDING)
            self._submitted += 1
        self._jobs.put(Job(seq, ts, body, prepare))

    def wait(self, timeout: float | None) -> float | None:
        """Wait up to ``timeout`` s until what was submitted so far is queued (or failed); the time left."""
        deadline = None if timeout is None else time.monotonic() + timeout
        with self._settled:
            target = self._submitted
            self._settled.wait_for(lambda: self._done >= target, timeout)
        return None if deadline is None else max(0.0, deadline - time.monotonic())

    def close(self, stall_timeout: float) -> None:
        """Wait while the worker makes progress (at most ``stall_timeout`` s without), then spool what is left."""
        while self._thread.is_alive() and self._done < self._submitted:
            self.wait(0.2)
            if time.monotonic() - self._progress_at > stall_timeout:
                break
        self._closing.set()  # from here on, images go to the spool without asking the server
        self._jobs.put(None)
        self._thread.join(timeout=max(30.0, stall_timeout))
        left = self._submitted - self._done
        if left:
            log.warning("runcast: %d image(s) or histogram(s) of run %s were not recorded before it closed",
                        left, self.run_id)

    def stats(self) -> MediaStats:
        return MediaStats(self._submitted - self._done, self._queued, self._uploaded, self._spooled, self._failed)

    # --- the worker ----------------------------------------------------------------------

    def _run(self) -> None:
        while (job := self._jobs.get()) is not None:
            try:
                self._queue_event(job, self._make(job))
            except Exception as exc:  # noqa: BLE001 - the data's fault or a refusal: the run goes on
                self._failed += 1
                key = job.body["key"]
                (log.debug if key in self._warned else log.warning)(
                    "runcast: %s %r at step %d was not recorded: %s", job.body["kind"], key, job.body["step"],
                    exc if isinstance(exc, (_Failed, ValueError)) else f"{type(exc).__name__}: {exc}")
                self._warned.add(key)
            with self._settled:
                self._done += 1
                self._progress_at = time.monotonic()
                self._settled.notify_all()

    def _make(self, job: Job) -> dict[str, Any]:
        """The event's body: prepared, checked, and for an image, its bytes stored (or spooled)."""
        prepared = job.prepare()
        body = dict(job.body)
        if isinstance(prepared, Encoded):
            sha256 = hashlib.sha256(prepared.data).hexdigest()
            body.update(blob=sha256, content_type=prepared.content_type, width=prepared.width,
                        height=prepared.height, size=len(prepared.data))
        else:
            body.update(prepared)
        try:
            validate_event({"type": "media", "run": self.run_id, "segment": self.segment, "seq": job.seq,
                            "ts": job.ts, **body})
        except EventError as exc:
            raise _Failed(str(exc)) from None
        if isinstance(prepared, Encoded) and not self._store(body["blob"], prepared):
            body[SPOOLED] = True
        return body

    def _store(self, sha256: str, image: Encoded) -> bool:
        """True once the server holds the image; False when it was written to the spool instead."""
        if self._blobs is None or self._closing.is_set() or time.monotonic() < self._outage_until:
            return self._to_spool(sha256, image.data)
        delay = 0.25
        started = time.monotonic()
        while True:
            try:
                self._pace()
                if self._blobs.store(self.run_id, sha256, image.data, image.content_type):
                    self._uploaded += 1
                    self._paced(len(image.data))
                self._backoff.reset()
                return True
            except NotYet:
                if time.monotonic() - started > NOT_YET_WAIT or self._closing.wait(delay):
                    return self._to_spool(sha256, image.data)
                delay = min(delay * 2, 5.0)
            except Retryable as exc:
                self._outage_until = time.monotonic() + self._backoff.next(exc.retry_after)
                if not self._outage_warned:
                    self._outage_warned = True
                    log.warning("runcast: cannot store images on %s (%s); keeping them in the spool", self._blobs.url, exc)
                return self._to_spool(sha256, image.data)
            except Rejected as exc:
                raise _Failed(f"the server refused the image: {exc}") from None

    def _to_spool(self, sha256: str, data: bytes) -> bool:
        if self._spool is None:
            raise _Failed("the server cannot be reached and the run has no spool to keep the image in")
        try:
            write_blob(self._spool, sha256, data)
        except OSError as exc:
            raise _Failed(f"cannot write the image into the spool ({exc})") from None
        self._spooled += 1
        return False

    def _pace(self) -> None:
        wait = self._next_send - time.monotonic()
        if wait > 0:
            self._closing.wait(wait)

    def _paced(self, size: int) -> None:
        """``size`` bytes were sent: the next send waits until the average is within ``bandwidth``."""
        if self._bandwidth:
            self._next_send = max(time.monotonic(), self._next_send) + size / self._bandwidth

    def _queue_event(self, job: Job, body: dict[str, Any]) -> None:
        """Append the event to the run's queue (its time: the ``log`` call's; the item's: now, for the outbox)."""
        self._queue.append((job.seq, "media", time.time(), None, {**body, "ts": job.ts}))
        self._queued += 1
        if not self._wake.pending:
            self._wake.set()
