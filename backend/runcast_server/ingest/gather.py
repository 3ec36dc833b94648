"""A batch's metrics gathered per series: what ``points.write_metrics`` stores.

Both forms of the wire feed the same maps: a ``metrics`` event adds its values one by one; a
``metrics_columns`` event (``runcast.wire.columns``) adds each key's column with ``dict(zip())``
over the reversed arrays (so the first occurrence of a step wins, as with events), with no
Python object per row and no per-point loop unless a column holds NaN.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from runcast.wire.columns import present
from runcast.wire.events import COLUMNS_TYPE, is_system_event


@dataclass
class Gathered:
    """The metrics of a batch, per series, each map in batch order, the first occurrence winning."""

    # (segment_id, key) -> {step: value (NaN as None)}.
    batch: dict[tuple[int, str], dict[int, float | None]] = field(default_factory=dict)
    run_of_segment: dict[int, str] = field(default_factory=dict)
    # segment id -> {step: ts} of its first (non-system) metrics event at that step.
    stamps: dict[int, dict[int, float]] = field(default_factory=dict)
    received: int = 0  # the values the batch carries, repeats included


def gather(events: Sequence[dict[str, Any]], segments: dict[tuple[str, str], int]) -> Gathered:
    """The batch's points and step times (validated events in)."""
    g = Gathered()
    batch, stamps = g.batch, g.stamps
    for e in events:
        kind = e["type"]
        if kind == COLUMNS_TYPE:
            _add_columns(g, e, segments[(e["run"], e["segment"])])
            continue
        if kind != "metrics":
            continue
        seg = segments[(e["run"], e["segment"])]
        g.run_of_segment[seg] = e["run"]
        step = e["step"]
        values = e["values"]
        g.received += len(values)
        for key, value in values.items():
            points = batch.get((seg, key))
            if points is None:
                points = batch[(seg, key)] = {}
            if step not in points:
                points[step] = None if value != value else value  # noqa: PLR0124  (NaN; the cheapest test in this loop)
        if is_system_event(e):  # the system sampler's step is a wall-clock second, not a training step
            continue
        stamps.setdefault(seg, {}).setdefault(step, e["ts"])
    return g


def _add_columns(g: Gathered, e: dict[str, Any], seg: int) -> None:
    g.run_of_segment[seg] = e["run"]
    steps: list[int] = e["steps"]
    for key, column in e["values"].items():
        ks, vs = present(steps, column)
        g.received += len(ks)
        total = sum(vs)
        if total != total:  # noqa: PLR0124  (a NaN, or +Inf with -Inf: NaN is stored as NULL)
            vs = [None if v != v else v for v in vs]  # noqa: PLR0124
        fresh = dict(zip(reversed(ks), reversed(vs), strict=True))  # reversed: the first occurrence wins
        earlier = g.batch.get((seg, key))
        if earlier:
            fresh.update(earlier)  # an earlier event of the batch wins
        g.batch[(seg, key)] = fresh
    at = g.stamps.get(seg)
    times: list[float] = e["times"]
    if not at:
        at = g.stamps[seg] = dict(zip(steps, times, strict=True))
        if len(at) == len(steps):  # no step repeats: already the first occurrences, in row order
            return
        at.clear()
    for step, ts in zip(steps, times, strict=True):
        at.setdefault(step, ts)
