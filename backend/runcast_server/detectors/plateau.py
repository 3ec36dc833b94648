"""The plateau: the smoothed loss stopped improving, by more than its own noise explains."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

from runcast_server.detectors.signals import Signal
from runcast_server.detectors.stats import MAD_SIGMA, median, median_mad

MEDIAN_SE = 1.2533  # a median of n points with normal noise sigma has standard error this x sigma / sqrt(n)
HEALTHY = 0.5  # a power-law loss falls over "recent" at least about this x its fall over "before"
MARKS_KEPT = 17  # two windows of `window_steps`, a mark every `window_steps / 8` steps


def plateau(state: dict[str, Any], p: dict[str, Any], step: int, value: float, ctx: dict[str, Any]) -> list[Signal]:
    """The smoothed loss fell by less than ``ratio`` x its fall over the window before.

    Every ``window_steps / 8`` steps, once ``min_points`` points came in since the last
    one, a mark records the points since the last mark: the mean of the medians of their
    blocks of up to ``smooth`` points (a block never spans two marks, so a mark describes
    its own steps however sparse the log), the mean of the blocks' median steps, the
    points' count and the mean block MAD. "before" and "recent" are the falls per step
    (least-squares slopes of the marks) over the ``w`` steps before the last ``w`` and
    over the last ``w``, with ``w = min(window_steps, step / 4)``: both lie in the second half of the run so far, where a
    loss that follows a power law in the step falls over "recent" at least about half
    (``HEALTHY``) what it fell over "before". It opens when "before" is at least
    ``min_rel`` of the level per ``window_steps``, "recent" is under ``ratio`` x "before",
    and "recent" lies ``z`` standard errors below ``HEALTHY`` x "before", the noise per
    point being the series' own (its marks' MADs): a few dozen sampled points cannot make
    a healthy curve read as flat.
    """
    if not math.isfinite(value):
        return []
    marks: list[list[float]] = state.setdefault("marks", [])
    if marks and len(marks[0]) < 5:  # marks of an earlier version (level only): start again
        marks.clear()
    state.setdefault("first", step)
    if step - state["first"] < p["warmup_steps"]:
        return []
    block: list[list[float]] = state.setdefault("block", [])  # [step, value] of the points of the current block
    acc: list[float] = state.setdefault("acc", [0.0, 0.0, 0.0, 0])  # n x block median, n x its MAD, n x its median step, n
    if len(acc) != 4:
        acc[:] = [0.0, 0.0, 0.0, 0]
    block.append([step, value])
    spacing = max(1, int(p["window_steps"]) // 8)
    due = (not marks or step - marks[-1][0] >= spacing) and acc[3] + len(block) >= p["min_points"]
    if len(block) >= p["smooth"] or due:
        _close_block(block, acc)
    if not due:
        return []
    return _mark(state, p, step, marks, acc, spacing)


def plateau_many(state: dict[str, Any], p: dict[str, Any], steps: Sequence[int], values: Sequence[float],
                 ctx: dict[str, Any]) -> list[tuple[int, Signal]]:
    """``plateau`` over consecutive points (``signals.BatchDetector``): once its lists exist, a
    point is appended to the block here, and only a full block or a due mark costs more."""
    out: list[tuple[int, Signal]] = []
    isfinite = math.isfinite
    smooth, min_points, warmup = p["smooth"], p["min_points"], p["warmup_steps"]
    spacing = max(1, int(p["window_steps"]) // 8)
    block: list[list[float]] | None = None
    for step, value in zip(steps, values):
        if block is None:
            for sig in plateau(state, p, step, value, ctx):
                out.append((step, sig))
            if isfinite(value) and step - state["first"] >= warmup:  # past the warm-up and the checks of old states
                block, marks, acc, first = state["block"], state["marks"], state["acc"], state["first"]
            continue
        if not isfinite(value) or step - first < warmup:
            continue
        block.append([step, value])
        due = (not marks or step - marks[-1][0] >= spacing) and acc[3] + len(block) >= min_points
        if len(block) >= smooth or due:
            _close_block(block, acc)
        if due:
            for sig in _mark(state, p, step, marks, acc, spacing):
                out.append((step, sig))
    return out


def _mark(state: dict[str, Any], p: dict[str, Any], step: int, marks: list[list[float]], acc: list[float],
          spacing: int) -> list[Signal]:
    """Record a due mark from ``acc`` and test the rule on the marks (``plateau``)."""
    n = acc[3]
    level = acc[0] / n
    marks.append([step, level, acc[2] / n, n, acc[1] / n])  # last step, level, its step, points, MAD
    acc[:] = [0.0, 0.0, 0.0, 0]
    del marks[: max(0, len(marks) - MARKS_KEPT)]
    if state.get("open"):
        if level < state["open"]["level"] * (1 - p["min_rel"]):
            state["open"] = None
            return [Signal("plateau", "close", step, {"reason": "improved", "smoothed": level})]
        return []
    w = min(int(p["window_steps"]), step // 4)
    i_mid, i_start = _mark_near(marks, step - w, spacing), _mark_near(marks, step - 2 * w, spacing)
    if w < spacing or i_mid is None or i_start is None or not i_start < i_mid < len(marks) - 1:
        return []
    # Both falls are linear in the marks' levels, which gives the exact noise of any
    # combination of them, the middle mark that both windows share included.
    c_before = _fall_coefs(marks, i_start, i_mid)
    c_recent = _fall_coefs(marks, i_mid, len(marks) - 1)
    if c_before is None or c_recent is None:
        return []
    c_gap = {i: HEALTHY * c_before.get(i, 0.0) - c_recent.get(i, 0.0) for i in range(i_start, len(marks))}
    before, recent, gap = (sum(c * marks[i][1] for i, c in cs.items()) for cs in (c_before, c_recent, c_gap))
    sigma = MEDIAN_SE * MAD_SIGMA * sorted(m[4] for m in marks)[len(marks) // 2]
    noise_gap = _noise(marks, c_gap, sigma)
    improving = before >= p["min_rel"] * abs(marks[i_mid][1]) / p["window_steps"]
    if improving and recent < p["ratio"] * before and gap > p["z"] * noise_gap:
        state["open"] = {"level": level}
        return [Signal("plateau", "open", step, {"smoothed": level, "fall_recent": recent * w, "fall_before": before * w,
                                                  "noise": noise_gap * w, "window_steps": w, "ratio": p["ratio"]})]
    return []


def _close_block(block: list[list[float]], acc: list[float]) -> None:
    """Add the block's median, MAD and median step, weighted by its size, to the mark being
    built; empty it. The median step, not the mean: where the trend outweighs the noise the
    median value is the value near the median step, and a sampled log's steps are uneven."""
    if block:
        n = len(block)
        m, d = median_mad([v for _, v in block])
        acc[0] += m * n
        acc[1] += d * n
        acc[2] += median([s for s, _ in block]) * n
        acc[3] += n
        block.clear()


def _fall_coefs(marks: list[list[float]], lo: int, hi: int) -> dict[int, float] | None:
    """``c`` such that ``sum(c[i] * level_i)`` is the fall per step of marks ``lo``..``hi``: minus
    the slope of their least-squares line over their steps, each weighted by its points
    (None if they all describe one step: a resume that recomputed steps can do that)."""
    span = range(lo, hi + 1)
    x0 = sum(marks[i][3] * marks[i][2] for i in span) / sum(marks[i][3] for i in span)
    sxx = sum(marks[i][3] * (marks[i][2] - x0) ** 2 for i in span)
    return {i: -marks[i][3] * (marks[i][2] - x0) / sxx for i in span} if sxx > 0 else None


def _noise(marks: list[list[float]], coefs: dict[int, float], sigma: float) -> float:
    """The standard error of ``sum(coefs[i] * level_i)``, a mark's level having variance sigma^2 / its points."""
    return sigma * math.sqrt(sum(c * c / marks[i][3] for i, c in coefs.items()))


def _mark_near(marks: list[list[float]], target: float, tolerance: int) -> int | None:
    """The index of the mark whose last step is nearest ``target``, if it is within ``tolerance`` steps."""
    best = min(range(len(marks)), key=lambda i: abs(marks[i][0] - target))
    return best if abs(marks[best][0] - target) <= tolerance else None
