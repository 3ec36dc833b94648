"""A queued item as the event that goes on the wire: done by the sender thread, so that the
training thread never reads a device tensor, hashes or copies a checkpoint."""

from __future__ import annotations

from collections.abc import Callable
from math import isfinite
from typing import Any

from .. import checkpoint_files
from ..values import read_deferred
from ..wire.checks import encode_value
from ..wire.limits import SCHEMA_VERSION
from .batches import Batch, batch_bodies
from .config import SenderConfig
from .outbox import Item
from .renames import Renames


def to_wire(item: Item, run: str, segment: str, stop: Callable[[], bool]) -> dict[str, Any] | None:
    """The wire event of ``item`` (None: a metrics item whose every tensor could not be read).
    ``stop()``: the run is out of time (a checkpoint's copy or hash gives up)."""
    seq, kind, ts, step, body = item
    if kind == "metrics":
        values = read_deferred(body)
        if not values:
            return None
        # All finite (their sum is: the usual case): the floats go as they are, no call per value.
        if not isfinite(sum(values.values())):
            values = {key: encode_value(value) for key, value in values.items()}
        body = {"step": step, "values": values}
    elif kind == "checkpoint":
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
    server that refused them."""
    wire = [event for item in items if (event := to_wire(item, config.run, config.segment, stop)) is not None]
    bodies = batch_bodies(renames.strip(wire), max_events, config.batch_bytes, columns=config.columns)
    return bodies, len(items) - len(wire)
