"""What a detector returns (``Signal``), the shape of a point detector (``PointDetector``) and of
its batched form (``BatchDetector``), which the runner calls."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol


@dataclass
class Signal:
    """An alert opening or closing, with its evidence."""

    kind: str
    phase: str  # "open" | "close"
    step: int | None
    evidence: dict[str, Any] = field(default_factory=dict)
    key: str = ""


class PointDetector(Protocol):
    """``update(state, p, step, value, ctx)``: one point of a series through one detector.

    ``state`` is the detector's JSON-able state for the series (mutated in place), ``p``
    its parameters (a section of the effective config), ``ctx`` what detectors of one
    segment share within a ``feed`` (the smoothed train loss, for the validation check).
    """

    def __call__(
        self, state: dict[str, Any], p: dict[str, Any], step: int, value: float, ctx: dict[str, Any]
    ) -> list[Signal]: ...


class BatchDetector(Protocol):
    """``update_many(state, p, steps, values, ctx)``: consecutive points of a series through one detector.

    Exactly what calling the point detector on each point in turn does to ``state`` and
    ``ctx``; ``steps`` strictly increasing. Returns each signal with the step of the point
    that emitted it (an opening is dated at its candidate's step, which can be earlier).
    """

    def __call__(
        self, state: dict[str, Any], p: dict[str, Any], steps: Sequence[int], values: Sequence[float],
        ctx: dict[str, Any],
    ) -> list[tuple[int, Signal]]: ...


def one_by_one(update: PointDetector) -> BatchDetector:
    """The batched form of a point detector with no faster one: a call per point."""

    def update_many(state: dict[str, Any], p: dict[str, Any], steps: Sequence[int], values: Sequence[float],
                    ctx: dict[str, Any]) -> list[tuple[int, Signal]]:
        return [(step, sig) for step, value in zip(steps, values) for sig in update(state, p, step, value, ctx)]

    return update_many
