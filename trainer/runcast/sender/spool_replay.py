"""Sending a spool's batches (``spool.Spool``) in order: by the sender after an outage, and by
``runcast sync``. Each batch leaves in parts the server takes: at most its event and byte limits,
halved further while it answers that a part is too large (413, or 422 on ``events``). Images kept
in the spool are stored on the server before the events that show them (``spool_blobs``)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from ..wire import events as schema
from .blob_http import BlobClient
from .renames import Renames
from .spool import Spool
from .spool_blobs import send_with_blobs
from .spool_parts import Parts
from .transport import Rejected, Retryable, Transport


@dataclass
class ReplayResult:
    """What one replay pass did."""

    sent_events: int = 0
    sent_batches: int = 0  # spooled batches with events stored
    rejected_events: int = 0
    rejections: list[str] = field(default_factory=list)
    stopped: str | None = None  # why the pass stopped early (service unavailable, or a stop_on status)
    retry_after: float | None = None  # the service's hint, when it gave one
    done: bool = False  # nothing is left in the spool


def replay(
    spool: Spool,
    transport: Transport,
    *,
    timeout: float = 10.0,
    max_batches: int | None = None,
    max_events: int = schema.MAX_BATCH_EVENTS,
    max_bytes: int = schema.MAX_BATCH_BYTES,
    stop_on: tuple[int, ...] = (),
    keep_refused: bool = False,
    on_batch: Callable[[int], None] | None = None,
    blobs: BlobClient | None = None,
    blob_wait: float = 60.0,
    renames: Renames | None = None,
    on_commands: Callable[[list[dict[str, Any]]], None] | None = None,
) -> ReplayResult:
    """Send the spool's batches in order until it is empty, the service fails, or ``max_batches``.

    A part the service refuses for good is reported and, with ``keep_refused``, set aside in
    the spool (``Spool.set_aside``); otherwise skipped. A refusal whose status is in
    ``stop_on`` stops the pass before the batch is acknowledged (e.g. 401: a wrong token, not
    bad data). ``on_batch(events)`` is called after each batch (progress). ``blobs``: where the
    spool's images go (without it they stay, and events showing them are sent as they are);
    ``blob_wait``: how long an image waits for the server to know its run. ``renames``: what
    the server took of run renames so far (``renames.py``; one per pass without it).
    ``on_commands``: given the team's commands an answer carries (a live run's sender; the server
    counts a command delivered once an answer carried it, so a replay's answers count too).
    """
    result = ReplayResult()
    parts = Parts(max_events, max_bytes, renames or Renames(transport.url), on_commands)
    for handled, (body, events, end) in enumerate(spool.pending()):
        if max_batches is not None and handled >= max_batches:
            return result
        try:
            sent, refused = send_with_blobs(parts, transport, blobs, spool.path, body, events, timeout, stop_on,
                                            blob_wait)
        except Retryable as exc:
            result.stopped, result.retry_after = str(exc), exc.retry_after
            return result
        except Rejected as exc:  # a status in stop_on
            result.stopped = str(exc)
            return result
        result.sent_events += sent
        result.sent_batches += 1 if sent else 0
        for part_body, count, refusal in refused:
            if keep_refused:
                spool.set_aside(part_body, count, refusal)
            result.rejected_events += count
            result.rejections.append(str(refusal))
        if on_batch is not None:
            on_batch(len(events))
        spool.ack(end)
    result.done = True
    return result
