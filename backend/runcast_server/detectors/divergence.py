"""Divergence: the smoothed train loss trending up, or validation loss rising while train loss falls."""

from __future__ import annotations

import math
from bisect import bisect_right
from collections.abc import Sequence
from typing import Any, Final

from runcast_server.detectors.signals import Signal
from runcast_server.detectors.stats import middle, ordered, push_ordered, slide

TRACE: Final = "train_trace"  # ctx's key of a feed's ``TrainTrace``, while it has validation points


class TrainTrace:
    """The smoothed train loss each loss key set in one feed, by step, for the validation check.

    One by one in step order (loss before validation loss at a step, loss keys in their
    order), a validation point reads the smoothed loss the last loss point before it set.
    Recording it by step lets the train trend take all its points at once and the check
    look its step up (``at``), instead of both being cut at every validation step.
    """

    def __init__(self, before: float | None) -> None:
        self.before = before  # the smoothed loss an earlier feed left
        self._keys: list[tuple[list[int], list[float]]] = []  # per loss key, in the runner's order

    def key(self) -> tuple[list[int], list[float]]:
        """The (steps, smoothed losses) lists a loss key's points fill, in step order."""
        self._keys.append(([], []))
        return self._keys[-1]

    def at(self, step: int) -> float | None:
        """The smoothed loss a validation point at ``step`` reads: the one set at the latest step <= ``step``
        (of equal steps, the later key's), or the earlier feed's."""
        found, at = self.before, -1
        for steps, meds in self._keys:
            i = bisect_right(steps, step) - 1
            if i >= 0 and steps[i] >= at:
                found, at = meds[i], steps[i]
        return found


def divergence_train(state: dict[str, Any], p: dict[str, Any], step: int, value: float, ctx: dict[str, Any]) -> list[Signal]:
    """The moving median of the train loss ``rise`` above its best for ``confirm`` points.

    Also leaves the current smoothed train loss in ``ctx`` for the validation check.
    """
    if not math.isfinite(value):
        return []
    ring: list[float] = state.setdefault("ring", [])
    window = push_ordered(state, ring, value, p["smooth"])
    if len(ring) < max(3, p["smooth"] // 4):
        return []
    med = middle(window)
    ctx["train_smoothed"] = med
    best: float | None = state.get("best")
    if best is None or (med < best and not state.get("open")):  # an open alert always has a best
        state["best"], state["best_step"] = med, step
        best = med
    level = best * (1 + p["rise"]) if best >= 0 else best * (1 - p["rise"])
    if state.get("open"):
        if med <= best * (1 + p["rise"] / 2):
            state["open"] = None
            state["best"], state["above"] = med, 0
            return [Signal("divergence", "close", step, {"reason": "recovered", "smoothed": med, "best": best})]
        return []
    if med > level and len(ring) >= p["smooth"] // 2:
        state["above"] = state.get("above", 0) + 1
        if state["above"] >= p["confirm"]:
            state["open"] = True
            return [Signal("divergence", "open", step, {"mode": "train_trend", "smoothed": med, "best": best,
                                                         "best_step": state["best_step"], "rise": p["rise"]})]
    else:
        state["above"] = 0
    return []


def divergence_train_many(state: dict[str, Any], p: dict[str, Any], steps: Sequence[int], values: Sequence[float],
                           ctx: dict[str, Any]) -> list[tuple[int, Signal]]:
    """``divergence_train`` over consecutive points (``signals.BatchDetector``).

    The rule runs here, inline, once the point detector has taken the batch's first point:
    ``opened`` tells which half of it, the watch (no alert open) or the wait for recovery.
    ``ctx["train_step"]`` is the step of ``ctx["train_smoothed"]`` within the
    runner's feed: of two loss keys, the one whose smoothed value is at the later step sets it
    (the point order: step, then key), as the point detectors called in that order would.
    Each smoothed value is also recorded in the feed's ``TrainTrace`` when it has one.
    """
    out: list[tuple[int, Signal]] = []
    trace: TrainTrace | None = ctx.get(TRACE)
    traced = trace is not None
    trace_steps, trace_meds = trace.key() if trace is not None else ([], [])
    isfinite = math.isfinite
    size, rise, confirm = p["smooth"], p["rise"], p["confirm"]
    least, half = max(3, size // 4), size // 2
    up, down, back = 1 + rise, 1 - rise, 1 + rise / 2
    ring: list[float] = []
    window: list[float] = []
    fast = opened = False
    best: float | None = None
    above: int | None = None
    level = 0.0
    last_med: float | None = None
    last_step = 0
    for step, value in zip(steps, values):
        if not isfinite(value):
            continue
        if not fast:
            one: dict[str, Any] = {}
            for sig in divergence_train(state, p, step, value, one):
                out.append((step, sig))
            if "train_smoothed" in one:
                last_med, last_step = one["train_smoothed"], step
                if traced:
                    trace_steps.append(step)
                    trace_meds.append(last_med)
            fast, opened = True, bool(state.get("open"))
            ring = state["ring"]
            window = ordered(state, ring)
            best, above = state.get("best"), state.get("above")
            level = 0.0 if best is None else (best * up if best >= 0 else best * down)
            continue
        slide(ring, window, value, size)
        n = len(ring)
        if n < least:
            continue
        mid = n // 2
        med = window[mid] if n % 2 else 0.5 * (window[mid - 1] + window[mid])
        last_med, last_step = med, step
        if traced:
            trace_steps.append(step)
            trace_meds.append(med)
        if opened:  # an open alert always has a best
            assert best is not None
            if med <= best * back:
                state["open"], opened = None, False
                out.append((step, Signal("divergence", "close", step, {"reason": "recovered", "smoothed": med, "best": best})))
                best = state["best"] = med
                above = state["above"] = 0
                level = med * up if med >= 0 else med * down
            continue
        if best is None or med < best:
            best = state["best"] = med
            state["best_step"] = step
            level = med * up if med >= 0 else med * down
        if med > level and n >= half:
            above = state["above"] = (above or 0) + 1
            if above >= confirm:
                state["open"] = opened = True
                out.append((step, Signal("divergence", "open", step, {
                    "mode": "train_trend", "smoothed": med, "best": best, "best_step": state["best_step"], "rise": rise})))
        elif above != 0:  # also when the key is not there yet
            state["above"] = above = 0
    if last_med is not None and last_step >= ctx.get("train_step", last_step):
        ctx["train_smoothed"], ctx["train_step"] = last_med, last_step
    return out


def divergence_val(state: dict[str, Any], p: dict[str, Any], step: int, value: float, ctx: dict[str, Any]) -> list[Signal]:
    """Validation loss rising for ``val_rising_evals`` evaluations while the smoothed train loss falls."""
    if not math.isfinite(value):
        return []
    train = ctx.get("train_smoothed")
    prev = state.get("prev")
    best = state.get("best")
    out: list[Signal] = []
    if state.get("open"):
        if value <= best * (1 + p["val_min_rel"] / 2):
            state["open"] = None
            state["best"] = value
            out.append(Signal("divergence", "close", step, {"reason": "recovered", "val": value, "val_best": best}))
    else:
        if prev is not None and value > prev:
            if state.get("rises", 0) == 0:
                state["train_start"] = state.get("train_prev")
            state["rises"] = state.get("rises", 0) + 1
        else:
            state["rises"] = 0
        start = state.get("train_start")
        if (
            state.get("rises", 0) >= p["val_rising_evals"]
            and best is not None
            and value > best * (1 + p["val_min_rel"])
            and train is not None
            and start is not None
            and train < start
        ):
            state["open"] = True
            out.append(Signal("divergence", "open", step, {"mode": "overfit", "val": value, "val_best": best,
                                                            "train_smoothed": train, "train_at_rise_start": start,
                                                            "rising_evals": state["rises"]}))
        if best is None or value < best:
            state["best"] = value
    state["prev"], state["train_prev"] = value, train
    return out


def divergence_val_many(state: dict[str, Any], p: dict[str, Any], steps: Sequence[int], values: Sequence[float],
                        ctx: dict[str, Any]) -> list[tuple[int, Signal]]:
    """``divergence_val`` over consecutive points (``signals.BatchDetector``), each reading the smoothed train
    loss at its step from the feed's ``TrainTrace`` (``ctx["train_smoothed"]`` without one)."""
    trace: TrainTrace | None = ctx.get(TRACE)
    out: list[tuple[int, Signal]] = []
    for step, value in zip(steps, values):
        train = ctx.get("train_smoothed") if trace is None else trace.at(step)
        out.extend((step, sig) for sig in divergence_val(state, p, step, value, {"train_smoothed": train}))
    return out
