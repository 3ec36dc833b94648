"""Cutting wire events into batch bodies the receiving server takes: at most so many events and
so many bytes each (``events.MAX_BATCH_EVENTS`` and ``MAX_BATCH_BYTES`` by default; a server names
its own, lower or not, in ``GET /api/v1/whoami``), and about ``SEND_POINTS`` points at most."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from itertools import islice
from typing import Any, Final

from ..wire import events as schema
from ..wire.columns import encode_columns
from .outbox import Item
from .rows import Rows

# The points a batch carries at most, whatever the server takes (a soft limit: a batch is cut in
# equal parts): a batch of many keys a step is a long request and transaction (the embedded server
# holds its write lock for it), while one of few keys gains nothing past this size.
SEND_POINTS: Final = 40_000

Batch = tuple[bytes, Sequence[dict[str, Any]]]  # (the body, its events: a list, or the sender's Rows)


def batch_bodies(
    wire: Sequence[dict[str, Any]], max_events: int = schema.MAX_BATCH_EVENTS, max_bytes: int = schema.MAX_BATCH_BYTES,
    *, columns: bool = False,
) -> list[Batch]:
    """Encode ``wire`` as batches of at most ``max_events`` events, each halved until under ``max_bytes``
    (a single event larger than that is left whole: the server says why it refuses it). ``columns``: the
    server takes ``metrics_columns``, so a body carries each dense series as columns (``wire.columns``);
    the batch's list stays the events, one per logged step, for counting, halving and retries."""
    step = max(1, max_events)
    return [part for start in range(0, len(wire), step)
            for chunk in _within_points(wire[start:start + step])
            for part in _within_bytes(chunk, max_bytes, columns)]


def batch_sizes(take: int, limit: int, beat: bool, first_points: Callable[[int], int] = lambda n: 0) -> list[int]:
    """How many queued items each batch of ``take`` takes (at most ``limit``); with ``beat``, a heartbeat
    follows in the last one, or in one of its own after a full batch.

    ``first_points(n)``: the values the first ``n`` queued items carry. A first batch of more than
    ``SEND_POINTS`` is cut at about that many: its body goes out as soon as it is encoded, and the
    service stores it while the rest is encoded (a trainer's burst of many keys a step otherwise
    waited, in ``finish()``, for the whole of it to be encoded before the first request).
    """
    sizes = [limit] * (take // limit) + ([take % limit] if take % limit else [])
    if sizes and (points := first_points(sizes[0])) > SEND_POINTS:
        head = _part_size(sizes[0], points)  # the first of the equal parts ``_within_points`` cuts
        sizes[:1] = [head, sizes[0] - head]
    if beat and (not sizes or sizes[-1] == limit):
        sizes.append(0)
    return sizes


def queued_points(queue: Iterable[Item], n: int) -> int:
    """The values the first ``n`` items of ``queue`` carry (``batch_sizes``' ``first_points``)."""
    return sum(len(item[4]) for item in islice(queue, n) if item[1] == "metrics")


def _within_points(wire: Sequence[dict[str, Any]]) -> list[Sequence[dict[str, Any]]]:
    """``wire`` in as few equal parts as keep each near ``SEND_POINTS`` points."""
    points = wire.points() if isinstance(wire, Rows) else sum(
        len(e.get("values") or ()) for e in wire if isinstance(e, dict) and e.get("type") == "metrics")
    if points <= SEND_POINTS:
        return [wire]
    size = _part_size(len(wire), points)
    return [wire[start:start + size] for start in range(0, len(wire), size)]


def _part_size(items: int, points: int) -> int:
    """Items a part holds when ``items`` carrying ``points`` are cut in as few equal parts as keep each
    near ``SEND_POINTS`` points."""
    return -(-items // -(-points // SEND_POINTS))


def _within_bytes(wire: Sequence[dict[str, Any]], max_bytes: int, columns: bool) -> list[Batch]:
    if not wire:
        return []
    body = schema.dumps_batch(_wire_form(wire, columns))
    if len(body) <= max_bytes or len(wire) == 1:
        return [(body, wire)]
    half = len(wire) // 2
    return _within_bytes(wire[:half], max_bytes, columns) + _within_bytes(wire[half:], max_bytes, columns)


def _wire_form(wire: Sequence[dict[str, Any]], columns: bool) -> list[dict[str, Any]]:
    """The events as a body lists them: dense series as columns when the server takes them."""
    if isinstance(wire, Rows):
        return wire.with_columns() if columns else list(wire)
    return encode_columns(list(wire)) if columns else list(wire)


def is_columnar(body: bytes) -> bool:
    """Whether a body carries a ``metrics_columns`` event (an older server refuses it: send it again per event)."""
    return b'"type":"metrics_columns"' in body
