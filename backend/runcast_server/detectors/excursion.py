"""Excursions above the moving median: the loss spike and the gradient-norm explosion."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

from runcast_server.detectors.signals import BatchDetector, PointDetector, Signal
from runcast_server.detectors.stats import MAD_SIGMA, MIN_MAD_POINTS, mad, middle, ordered, push_ordered, slide


def excursion_up(kind: str) -> PointDetector:
    """A value far above the moving median: ``median + max(k * sigma, min_rel * |median|)``.

    Such a point is a candidate; it opens (dated at the candidate's step) once
    ``confirm_points`` consecutive points, the candidate included, lie above the recovery
    level (half-way between the baseline and the threshold). A candidate whose next point
    is back below that level is one hard batch, not an anomaly: healthy runs log such
    single-point jumps every few hundred steps (docs/alerts.md, "The spike rule"); both
    points then join the window. While open the baseline is frozen; closes after
    ``recover_points`` consecutive points below the recovery level, or, after
    ``max_open_points``, as a new level (the window is refilled from then on).
    """

    def update(state: dict[str, Any], p: dict[str, Any], step: int, value: float, ctx: dict[str, Any]) -> list[Signal]:
        if not math.isfinite(value):
            return []  # the nonfinite detector reports these
        ring: list[float] = state.setdefault("ring", [])
        if state.get("open"):
            o = state["open"]
            o["n"] += 1
            if value > o["peak"]:
                o["peak"], o["peak_step"] = value, step
            if value <= o["recover"]:
                o["ok"] += 1
            else:
                o["ok"] = 0
            reason = None
            if o["ok"] >= p["recover_points"]:
                reason = "recovered"
            elif o["n"] >= p["max_open_points"]:
                reason = "new_level"
                ring.clear()
                ordered(state, ring).clear()
            if reason:
                state["open"] = None
                ev = {"reason": reason, "peak": o["peak"], "peak_step": o["peak_step"], "points": o["n"],
                      "value": value, "baseline": o["baseline"]}
                return [Signal(kind, "close", step, ev)]
            return []
        pending = state.get("pending")
        if pending is not None:
            if value > pending["recover"]:
                pending["points"].append(value)
                if value > pending["peak"]:
                    pending["peak"], pending["peak_step"] = value, step
                if len(pending["points"]) >= p["confirm_points"]:
                    return [_confirm(kind, state, step, value)]
                return []
            state["pending"] = None  # back at once: a hard batch; its points are the run's noise
            for v in pending["points"]:
                push_ordered(state, ring, v, p["window"])
        if len(ring) >= p["warmup"]:
            signal = _excursion_open(kind, state, ring, p, step, value)
            if signal is not None:
                return [signal]
            if state.get("pending"):
                return []
        push_ordered(state, ring, value, p["window"])
        return []

    return update


def excursion_up_many(kind: str) -> BatchDetector:
    """``excursion_up(kind)`` over consecutive points (``signals.BatchDetector``).

    The quiet case, a finite value at or under the relative floor with nothing open or
    pending, is decided and pushed here; any other point goes through the point detector.
    """
    update = excursion_up(kind)

    def update_many(state: dict[str, Any], p: dict[str, Any], steps: Sequence[int], values: Sequence[float],
                    ctx: dict[str, Any]) -> list[tuple[int, Signal]]:
        out: list[tuple[int, Signal]] = []
        isfinite = math.isfinite
        size, warmup, min_rel = p["window"], p["warmup"], p["min_rel"]
        ring: list[float] = []
        window: list[float] = []
        quiet = False
        for step, value in zip(steps, values):
            if quiet and isfinite(value):
                n = len(window)
                mid = n // 2
                med = window[mid] if n % 2 else 0.5 * (window[mid - 1] + window[mid])
                if value <= med + min_rel * abs(med):
                    slide(ring, window, value, size)
                    continue
            for sig in update(state, p, step, value, ctx):
                out.append((step, sig))
            ring = state.get("ring", [])
            quiet = "ring" in state and len(ring) >= warmup and not state.get("open") and state.get("pending") is None
            if quiet:
                window = ordered(state, ring)
        return out

    return update_many


def _excursion_open(
    kind: str, state: dict[str, Any], ring: list[float], p: dict[str, Any], step: int, value: float
) -> Signal | None:
    """The excursion's opening signal if ``value`` crosses the threshold over ``ring``, else None."""
    window = ordered(state, ring)
    med = middle(window)
    floor = p["min_rel"] * abs(med)
    if value <= med + floor:
        # The threshold is never below the relative floor: the MAD (most of this detector's
        # cost, once per point) cannot change the answer, so it is not computed.
        return None
    # The MAD of a handful of points says little: below MIN_MAD_POINTS only the
    # relative floor applies (e.g. right after a resume, or in sparse logs).
    sigma = MAD_SIGMA * mad(window, med) if len(ring) >= MIN_MAD_POINTS else 0.0
    margin = max(p["k"] * sigma, floor)
    threshold = med + margin
    if value <= threshold:
        return None
    ev = {"value": value, "baseline": med, "sigma": sigma, "threshold": threshold,
          "deviation_sigmas": (value - med) / sigma if sigma > 0 else None, "window": len(ring)}
    state["pending"] = {"step": step, "recover": med + margin / 2, "peak": value, "peak_step": step,
                        "points": [value], "evidence": ev}
    if p["confirm_points"] <= 1:
        return _confirm(kind, state, step, value)
    return None


def _confirm(kind: str, state: dict[str, Any], step: int, value: float) -> Signal:
    """Open the pending candidate: the alert is dated at its first point, its evidence says when it was confirmed."""
    pending = state.pop("pending")
    ev = pending["evidence"]
    n = len(pending["points"]) - 1  # points after the first, as the open state counts them
    state["open"] = {"baseline": ev["baseline"], "threshold": ev["threshold"], "recover": pending["recover"],
                     "peak": pending["peak"], "peak_step": pending["peak_step"], "n": n, "ok": 0}
    if n:
        ev = {**ev, "confirmed_step": step, "confirmed_value": value}
    return Signal(kind, "open", pending["step"], ev)
