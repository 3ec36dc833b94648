"""Sending planned runs to the ingest API in batches, one batch in flight while the next is encoded.

A run's ``run_started`` events go first (the server must know a segment before its
points), then its metrics, samples and media, notes and ``finished`` events. Batches hold at
most as many events and bytes as the server takes (``GET /api/v1/whoami``; by default
``COMPATIBLE_BATCH_EVENTS``, what every server takes, and ``MAX_BATCH_BYTES``), and carry dense
series as columns (``runcast.wire.columns``) to a server that lists that form.
An image's bytes go to the blob route (``HEAD``, then ``PUT`` what the server lacks) just
before the batch holding its event, never in the batch of the run's ``run_started`` (the
server takes a blob only for a run it has stored; a 404 while its worker stores the run is
tried again). A batch or blob the service cannot take now (``Retryable``) is tried again
with back-off; one it refuses (``Rejected``) stops the import. Whatever was sent before a failure is stored, and a second run of
the same import sends it again without storing anything twice: that is how an
interrupted import resumes.
"""

from __future__ import annotations

import time
from collections import deque
from collections.abc import Callable, Iterable, Iterator, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from functools import partial
from typing import TYPE_CHECKING, Any, Final, Protocol

from runcast.importers.model import Blob
from runcast.sender.batches import batch_bodies
from runcast.sender.transport import Rejected, Retryable, Transport
from runcast.wire import events

if TYPE_CHECKING:
    from runcast.handshake import Identity

BACKOFF_S: Final = (0.5, 1.0, 2.0, 4.0, 8.0, 15.0, 30.0)
SEND_TIMEOUT_S: Final = 60.0


class SendFailed(Exception):
    """The service did not take a batch; the message says what to do. ``status``: the HTTP
    status of a refusal (None when the service could not be reached)."""

    def __init__(self, message: str, status: int | None = None) -> None:
        super().__init__(message)
        self.status = status


class Planned(Protocol):
    """What is sent of one run: ``started`` (its segments' ``run_started``) first, then ``body()``'s
    events, each with the count of points it stores (``plan.Plan``, ``eval_plan.EvalPlan``)."""

    @property
    def started(self) -> list[dict[str, Any]]: ...

    @property
    def blobs(self) -> dict[str, Blob]:
        """The images its media events name, by SHA-256."""

    def body(self) -> Iterator[tuple[dict[str, Any], int]]: ...


class Blobs(Protocol):
    """Where images go (``runcast.sender.blob_http.BlobClient``)."""

    url: str

    def store(self, run: str, sha256: str, data: bytes, content_type: str) -> bool:
        """HEAD, then PUT what the server lacks."""


@dataclass
class Batch:
    body: bytes
    events: Sequence[dict[str, Any]]
    points: int
    blobs: list[Blob] = field(default_factory=list)  # to upload before the batch, for its run (events[0]["run"])


@dataclass(frozen=True)
class Limits:
    """What one batch may hold for the receiving server (its ``whoami``), and whether dense series go as columns."""

    max_events: int = events.COMPATIBLE_BATCH_EVENTS
    max_bytes: int = events.MAX_BATCH_BYTES
    columns: bool = False

    @classmethod
    def of(cls, who: Identity | None) -> Limits:
        """The limits of a server's whoami answer (None: a server that does not say, so what every server takes)."""
        return cls() if who is None else cls(who.max_batch_events, who.max_batch_bytes, who.columns)


def batches(plans: Iterable[Planned], limits: Limits = Limits()) -> Iterator[Batch]:
    """Every plan's events cut into batches (a batch never mixes runs; see the module for images)."""
    for plan in plans:
        pending: list[dict[str, Any]] = []
        counts: list[int] = []
        images = plan.blobs
        first = True  # the batch being filled holds the run's run_started events
        for event, points in _events_of(plan):
            if first and images and event.get("blob") in images and event["type"] == "media":
                yield from _encode(pending, counts, images, limits)
                pending, counts, first = [], [], False
            pending.append(event)
            counts.append(points)
            if len(pending) >= limits.max_events:
                yield from _encode(pending, counts, images, limits)
                pending, counts, first = [], [], False
        if pending:
            yield from _encode(pending, counts, images, limits)


def send(
    plans: Iterable[Planned],
    transport: Transport,
    *,
    blobs: Blobs | None = None,
    limits: Limits = Limits(),
    on_batch: Callable[[Batch], None] = lambda batch: None,
    sleep: Callable[[float], None] = time.sleep,
    backoff: tuple[float, ...] = BACKOFF_S,
) -> int:
    """Send every plan's events in order (and its images to ``blobs``) in batches within ``limits``; returns
    the events sent. Raises SendFailed."""
    sent = 0
    with ThreadPoolExecutor(max_workers=1, thread_name_prefix="runcast-import") as pool:
        pending: deque[tuple[Future[None], Batch]] = deque()

        def settle() -> None:
            nonlocal sent
            future, batch = pending.popleft()
            future.result()
            sent += len(batch.events)
            on_batch(batch)

        try:
            for batch in batches(plans, limits):
                pending.append((pool.submit(_deliver, transport, blobs, batch, sleep, backoff), batch))
                if len(pending) > 1:
                    settle()
            while pending:
                settle()
        finally:
            for future, _ in pending:
                future.cancel()
    return sent


def _deliver(transport: Transport, blobs: Blobs | None, batch: Batch, sleep: Callable[[float], None],
             backoff: tuple[float, ...]) -> None:
    for blob in batch.blobs:
        if blobs is None:
            raise SendFailed("this import holds images and was given nowhere to upload them")
        store = partial(_store, blobs, batch.events[0]["run"], blob)
        _retried(store, blobs.url, f"the image {blob.sha256[:12]}", sleep, backoff)
    _retried(lambda: transport.send(batch.body, batch.events, SEND_TIMEOUT_S), transport.url, "a batch", sleep, backoff)


def _store(blobs: Blobs, run: str, blob: Blob) -> None:
    blobs.store(run, blob.sha256, blob.load(), blob.content_type)


def _retried(call: Callable[[], object], url: str, what: str, sleep: Callable[[float], None],
             backoff: tuple[float, ...]) -> None:
    for attempt in range(len(backoff) + 1):
        try:
            call()
            return
        except Rejected as exc:
            raise SendFailed(f"{url} refused {what}: {exc}", exc.status) from None
        except Retryable as exc:
            if attempt == len(backoff):
                raise SendFailed(
                    f"{url} did not take {what} after {attempt + 1} tries ({exc}); "
                    "run the same command again to resume: what was stored is not stored twice"
                ) from None
            sleep(exc.retry_after if exc.retry_after is not None else backoff[attempt])


def _events_of(plan: Planned) -> Iterator[tuple[dict[str, Any], int]]:
    for event in plan.started:
        yield event, 0
    yield from plan.body()


def _encode(wire: list[dict[str, Any]], counts: list[int], images: dict[str, Blob], limits: Limits) -> list[Batch]:
    """One batch's bodies (halved until each is under the byte limit), each with its points and images."""
    out: list[Batch] = []
    start = 0
    for body, part in batch_bodies(wire, len(wire), limits.max_bytes, columns=limits.columns):
        needed = {e["blob"]: images[e["blob"]] for e in part if e["type"] == "media" and e.get("blob") in images}
        out.append(Batch(body, part, sum(counts[start:start + len(part)]), list(needed.values())))
        start += len(part)
    return out
