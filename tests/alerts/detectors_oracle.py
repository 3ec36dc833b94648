"""The detectors as they were before issue 31's batched path (commit 8d9e385), kept only as the
oracle of ``test_detector_batches``: the per-point runner and the point detectors it made
faster, copied unchanged but for the names. Not product code; never import it from there."""

from __future__ import annotations

import math
from operator import itemgetter
from typing import Any

from runcast_server.detectors.core import ROLE_ORDER, role_of
from runcast_server.detectors.signals import PointDetector, Signal
from runcast_server.detectors.stats import (
    MAD_SIGMA,
    MIN_MAD_POINTS,
    mad,
    median,
    median_mad,
    middle,
    ordered,
    push_ordered,
)
from runcast_server.detectors.throughput import throughput


# --- nonfinite.py at 8d9e385 ---
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

# --- excursion.py at 8d9e385 ---
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

# --- plateau.py at 8d9e385 ---
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

# --- divergence.py at 8d9e385 ---
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

POINT_DETECTORS: dict[str, list[tuple[str, str, PointDetector]]] = {
    "loss": [
        ("nonfinite", "nonfinite", nonfinite),
        ("spike", "spike", excursion_up("spike")),
        ("plateau", "plateau", plateau),
        ("divergence", "divergence", divergence_train),
    ],
    "val_loss": [("divergence", "divergence_val", divergence_val)],
    "grad_norm": [("nonfinite", "nonfinite", nonfinite), ("grad_norm", "grad_norm", excursion_up("grad_norm"))],
    "throughput": [("throughput", "throughput", throughput)],
}


class OldRunner:
    """Feeds one segment's points to its detectors; ``states[(key, detector)]`` is the JSON state.

    ``feed`` takes points in any order within a call: they are sorted by step (loss before
    validation loss at one step) and each series skips steps it has already seen.
    """

    def __init__(self, cfg: dict[str, Any], states: dict[tuple[str, str], dict[str, Any]]) -> None:
        self.cfg = cfg
        self.states = states
        self.ctx: dict[str, Any] = {}
        self.touched: set[tuple[str, str]] = set()

    def feed(self, points: list[tuple[int, str, float]]) -> list[Signal]:
        """``points``: (step, key, value). Returns the signals, in step order."""
        cfg = self.cfg
        if not cfg.get("enabled", True):
            return []
        roles: dict[str, str | None] = {}  # this runs once per point: look each key's role up once
        tagged = []
        for step, key, value in points:
            role = roles.get(key, "")
            if role == "":
                role = roles[key] = role_of(key, cfg)
            if role is not None:
                tagged.append((step, ROLE_ORDER[role], key, role, value))
        tagged.sort(key=_ORDER)
        enabled = {
            role: [(name, cfg[section], update) for section, name, update in detectors
                   if cfg[section].get("enabled", True)]
            for role, detectors in POINT_DETECTORS.items() if role in roles.values()
        }
        states, touched = self.states, self.touched
        fed: dict[str, list[tuple[dict[str, Any], dict[str, Any], PointDetector, tuple[str, str]]]] = {}
        out: list[Signal] = []
        for step, _, key, role, value in tagged:
            detectors = fed.get(key)
            if detectors is None:  # the key's detectors and states, looked up once per call
                detectors = fed[key] = [(states.setdefault((key, name), {}), params, update, (key, name))
                                        for name, params, update in enabled[role]]
            for state, params, update, sk in detectors:
                last = state.get("last_step")
                if last is not None and step <= last:
                    continue
                state["last_step"] = step
                touched.add(sk)
                for sig in update(state, params, step, value, self.ctx):
                    sig.key = key
                    out.append(sig)
        return out


_ORDER = itemgetter(0, 1, 2)  # step, then loss before validation loss, then key
