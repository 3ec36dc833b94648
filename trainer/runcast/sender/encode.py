"""A queued item as the event that goes on the wire: done by the sender thread, so that the
training thread never reads a device tensor, hashes or copies a checkpoint."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from .. import checkpoint_files
from ..values import any_deferred, read_deferred
from ..wire.limits import SCHEMA_VERSION
from .batches import Batch, batch_bodies
from .config import SenderConfig
from .outbox import Item
from .renames import Renames
from .rows import Element, Rows, metrics_event


def to_wire(item: Item, run: str, segment: str, stop: Callable[[], bool]) -> dict[str, Any] | None:
    """The wire event of ``item`` (None: a metrics item whose every tensor could not be read).
    ``stop()``: the run is out of time (a checkpoint's copy or hash gives up)."""
    seq, kind, ts, step, body = item
    if kind == "metrics":
        values = read_deferred(body)
        return metrics_event((seq, kind, ts, step, values), run, segment) if values else None
    if kind == "checkpoint":
        body = checkpoint_files.prepare(body, stop)
    elif kind == "media":
        body = {k: v for k, v in body.items() if not k.startswith("_")}  # the media worker's marks stay here
    event: dict[str, Any] = {
        "v": SCHEMA_VERSION,
        "type": kind,
        "run": run,
        "segment": segment,
        "seq": seq,
        "ts": ts,
    }
    event.update(body)
    return event


Encoded = tuple[list[Batch], int]
"""Items' batch bodies, and how many of the items could not be encoded."""


def encode_items(items: list[Item], config: SenderConfig, renames: Renames, stop: Callable[[], bool],
                 max_events: int) -> Encoded:
    """``items`` as the batch bodies the service takes (``batches.batch_bodies``), renames stripped for a
    server that refused them. A metrics item stays a tuple (``rows.Rows``), its device tensors read."""
    deferred = any_deferred([item[4] for item in items if item[1] == "metrics"])
    elements: list[Element] = []
    for item in items:
        if item[1] == "metrics":
            if not deferred:
                elements.append(item)
            elif values := read_deferred(item[4]):
                elements.append(item if values is item[4] else (*item[:4], values))
        elif (event := to_wire(item, config.run, config.segment, stop)) is not None:
            elements.append(event)
    wire = renames.strip(Rows(elements, config.run, config.segment))
    return batch_bodies(wire, max_events, config.batch_bytes, columns=config.columns), len(items) - len(elements)
