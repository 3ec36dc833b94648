"""The plateau: the smoothed loss stopped improving."""

from __future__ import annotations

import math
from typing import Any

from runcast_server.detectors.signals import Signal
from runcast_server.detectors.stats import median, push


def plateau(state: dict[str, Any], p: dict[str, Any], step: int, value: float, ctx: dict[str, Any]) -> list[Signal]:
    """The smoothed loss fell by less than ``ratio`` x its fall over the window before.

    The loss is smoothed twice: the median of each block of ``smooth`` points, and every
    ``window_steps / 8`` steps the mean of the block medians since the last mark is
    recorded as a mark (17 kept: two windows), so a mark's noise is that of hundreds of
    points, not of one moving median. "recent" is the fall over the last ``w`` steps and
    "before" the fall over the ``w`` steps preceding them, with ``w = min(window_steps,
    step / 4)``: both windows lie in the second half of the run so far, where a loss that
    follows a power law in the step falls over "recent" at least about half what it fell
    over "before" (windows reaching back to the first steps compare against the steep
    start, which made healthy curves look flat). "before" must be at least ``min_rel`` of
    the level per ``window_steps`` (scaled to ``w``), so a run that was never improving
    much (or is noise) does not count as stopping.
    """
    if not math.isfinite(value):
        return []
    ring: list[float] = state.setdefault("ring", [])
    push(ring, value, p["smooth"])
    state.setdefault("first", step)
    if len(ring) < p["smooth"] or step - state["first"] < p["warmup_steps"]:
        return []
    state["n"] = state.get("n", 0) + 1
    acc: list[float] = state.setdefault("acc", [0.0, 0])  # sum and count of block medians since the last mark
    if state["n"] % p["smooth"] == 1 or p["smooth"] == 1:
        acc[0] += median(ring)
        acc[1] += 1
    spacing = max(1, int(p["window_steps"]) // 8)
    marks: list[list[float]] = state.setdefault("marks", [])
    if marks and step - marks[-1][0] < spacing:
        return []
    level = acc[0] / acc[1] if acc[1] else median(ring)  # a sparse log: no block since the last mark
    state["acc"] = [0.0, 0]
    marks.append([step, level])
    del marks[: max(0, len(marks) - 17)]
    if state.get("open"):
        if level < state["open"]["level"] * (1 - p["min_rel"]):
            state["open"] = None
            return [Signal("plateau", "close", step, {"reason": "improved", "smoothed": level})]
        return []
    w = min(int(p["window_steps"]), step // 4)
    if w < spacing:
        return []
    mid, start = _mark_near(marks, step - w, spacing), _mark_near(marks, step - 2 * w, spacing)
    if mid is None or start is None:
        return []
    before = start[1] - mid[1]
    recent = mid[1] - level
    if before >= p["min_rel"] * abs(mid[1]) * w / p["window_steps"] and recent < p["ratio"] * before:
        state["open"] = {"level": level}
        return [Signal("plateau", "open", step, {"smoothed": level, "fall_recent": recent, "fall_before": before,
                                                  "window_steps": w, "ratio": p["ratio"]})]
    return []


def _mark_near(marks: list[list[float]], target: float, tolerance: int) -> list[float] | None:
    """The mark whose step is nearest ``target``, if it is within ``tolerance`` steps."""
    best = min(marks, key=lambda m: abs(m[0] - target))
    return best if abs(best[0] - target) <= tolerance else None
