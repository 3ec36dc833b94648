"""What a detector returns (``Signal``) and the shape every point detector has (``PointDetector``)."""

from __future__ import annotations

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
