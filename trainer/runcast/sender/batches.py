"""Cutting wire events into batch bodies the receiving server takes: at most so many events and
so many bytes each (``events.MAX_BATCH_EVENTS`` and ``MAX_BATCH_BYTES`` by default; a server names
its own, lower or not, in ``GET /api/v1/whoami``)."""

from __future__ import annotations

from typing import Any

from ..wire import events as schema

Batch = tuple[bytes, list[dict[str, Any]]]  # (the body, its events)


def batch_bodies(
    wire: list[dict[str, Any]], max_events: int = schema.MAX_BATCH_EVENTS, max_bytes: int = schema.MAX_BATCH_BYTES
) -> list[Batch]:
    """Encode ``wire`` as batches of at most ``max_events`` events, each halved until under ``max_bytes``
    (a single event larger than that is left whole: the server says why it refuses it)."""
    step = max(1, max_events)
    return [part for start in range(0, len(wire), step) for part in _within_bytes(wire[start:start + step], max_bytes)]


def _within_bytes(wire: list[dict[str, Any]], max_bytes: int) -> list[Batch]:
    if not wire:
        return []
    body = schema.dumps_batch(wire)
    if len(body) <= max_bytes or len(wire) == 1:
        return [(body, wire)]
    half = len(wire) // 2
    return _within_bytes(wire[:half], max_bytes) + _within_bytes(wire[half:], max_bytes)
