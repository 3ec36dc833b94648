"""Non-finite values: NaN or +-Inf in the loss or the gradient norm."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

from runcast_server.detectors.signals import Signal


def _fin(x: float) -> float | str:
    """A float as JSON can hold it (``runcast.wire.events.encode_value``, whose module imports httpx)."""
    if math.isfinite(x):
        return x
    return "NaN" if math.isnan(x) else ("Infinity" if x > 0 else "-Infinity")


def nonfinite(state: dict[str, Any], p: dict[str, Any], step: int, value: float, ctx: dict[str, Any]) -> list[Signal]:
    """Open on the first NaN/Inf, close on the next finite value."""
    if not math.isfinite(value):
        if state.get("open"):
            state["open"]["n"] += 1
            return []
        state["open"] = {"n": 1, "first": _fin(value)}
        return [Signal("nonfinite", "open", step, {"value": _fin(value), "last_finite": state.get("last")})]
    state["last"] = value
    if state.get("open"):
        n = state["open"]["n"]
        state["open"] = None
        return [Signal("nonfinite", "close", step, {"reason": "finite_again", "points": n, "value": value})]
    return []


def nonfinite_many(state: dict[str, Any], p: dict[str, Any], steps: Sequence[int], values: Sequence[float],
                   ctx: dict[str, Any]) -> list[tuple[int, Signal]]:
    """``nonfinite`` over consecutive points (``signals.BatchDetector``)."""
    if values and not state.get("open") and math.isfinite(sum(values)):
        # All finite (a NaN or an infinity makes the sum non-finite) and nothing open: only the last value stays.
        state["last"] = values[-1]
        return []
    return [(step, sig) for step, value in zip(steps, values) for sig in nonfinite(state, p, step, value, ctx)]
