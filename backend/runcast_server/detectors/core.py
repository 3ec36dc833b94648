"""The detectors: incremental, O(1) work and memory per point, state as plain JSON.

Each point detector is a function ``update(state, params, step, value, ctx) -> [Signal]``
over a JSON-able ``state`` dict that it mutates. Memory per series is bounded by the
window parameters (at most 1000 floats), never by the run's length, so the state can be
stored in one database row and a restarted worker continues where the last one stopped.

Points must come in step order per series: a point whose step is <= the last step the
detector has seen is ignored (a batch that arrives after a later one, or a redelivered
one, changes nothing).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

MAD_SIGMA = 1.4826  # MAD of a normal distribution x this = its standard deviation
MIN_MAD_POINTS = 10


@dataclass
class Signal:
    """An alert opening or closing, with its evidence."""

    kind: str
    phase: str  # "open" | "close"
    step: int | None
    evidence: dict[str, Any] = field(default_factory=dict)
    key: str = ""


def _fin(x: float) -> Any:
    """A float as JSON can hold it."""
    if math.isfinite(x):
        return x
    return "NaN" if math.isnan(x) else ("Infinity" if x > 0 else "-Infinity")


def median(values: list[float]) -> float:
    return _middle(sorted(values))


def _middle(s: list[float]) -> float:
    """The median of an already sorted list."""
    n = len(s)
    mid = n // 2
    return s[mid] if n % 2 else 0.5 * (s[mid - 1] + s[mid])


def median_mad(values: list[float]) -> tuple[float, float]:
    """Median and median absolute deviation (this runs once per point of every detected series).

    The deviations are taken in sorted order: they then form two monotone runs, which
    ``sorted`` merges in linear time.
    """
    s = sorted(values)
    m = _middle(s)
    return m, _mad(s, m)


def _mad(ordered: list[float], median: float) -> float:
    return _middle(sorted([abs(v - median) for v in ordered]))


def _push(ring: list[float], value: float, size: int) -> None:
    ring.append(value)
    if len(ring) > size:
        del ring[: len(ring) - size]


# --- excursions above (spike, grad norm) ---------------------------------------------------------


def excursion_up(kind: str) -> Callable[..., list[Signal]]:
    """A value far above the moving median: ``median + max(k * sigma, min_rel * |median|)``.

    Opens on the first such point; while open the baseline is frozen; closes after
    ``recover_points`` consecutive points below the recovery level (half-way between the
    baseline and the threshold), or, after ``max_open_points``, as a new level (the window
    is refilled from then on).
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
            if reason:
                state["open"] = None
                ev = {"reason": reason, "peak": o["peak"], "peak_step": o["peak_step"], "points": o["n"],
                      "value": value, "baseline": o["baseline"]}
                return [Signal(kind, "close", step, ev)]
            return []
        if len(ring) >= p["warmup"]:
            signal = _excursion_open(kind, state, ring, p, step, value)
            if signal is not None:
                return [signal]
        _push(ring, value, p["window"])
        return []

    return update


def _excursion_open(
    kind: str, state: dict[str, Any], ring: list[float], p: dict[str, Any], step: int, value: float
) -> Signal | None:
    """The excursion's opening signal if ``value`` crosses the threshold over ``ring``, else None."""
    ordered = sorted(ring)
    med = _middle(ordered)
    floor = p["min_rel"] * abs(med)
    if value <= med + floor:
        # The threshold is never below the relative floor: the MAD (most of this detector's
        # cost, once per point) cannot change the answer, so it is not computed.
        return None
    # The MAD of a handful of points says little: below MIN_MAD_POINTS only the
    # relative floor applies (e.g. right after a resume, or in sparse logs).
    sigma = MAD_SIGMA * _mad(ordered, med) if len(ring) >= MIN_MAD_POINTS else 0.0
    margin = max(p["k"] * sigma, floor)
    threshold = med + margin
    if value <= threshold:
        return None
    state["open"] = {"baseline": med, "threshold": threshold, "recover": med + margin / 2,
                     "peak": value, "peak_step": step, "n": 0, "ok": 0}
    ev = {"value": value, "baseline": med, "sigma": sigma, "threshold": threshold,
          "deviation_sigmas": (value - med) / sigma if sigma > 0 else None, "window": len(ring)}
    return Signal(kind, "open", step, ev)


# --- non-finite ----------------------------------------------------------------------------------


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


# --- plateau -------------------------------------------------------------------------------------


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
    _push(ring, value, p["smooth"])
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


# --- divergence ----------------------------------------------------------------------------------


def divergence_train(state: dict[str, Any], p: dict[str, Any], step: int, value: float, ctx: dict[str, Any]) -> list[Signal]:
    """The moving median of the train loss ``rise`` above its best for ``confirm`` points.

    Also leaves the current smoothed train loss in ``ctx`` for the validation check.
    """
    if not math.isfinite(value):
        return []
    ring: list[float] = state.setdefault("ring", [])
    _push(ring, value, p["smooth"])
    if len(ring) < max(3, p["smooth"] // 4):
        return []
    med = median(ring)
    ctx["train_smoothed"] = med
    best = state.get("best")
    if (best is None or med < best) and not state.get("open"):
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


# --- throughput ----------------------------------------------------------------------------------


def throughput(state: dict[str, Any], p: dict[str, Any], step: int, value: float, ctx: dict[str, Any]) -> list[Signal]:
    """A sustained drop: ``confirm`` of the last ``confirm + confirm // 5`` blocks below the
    baseline by a clear margin.

    Points are grouped in blocks of ``block`` and each block is summarised by its median,
    so a block only reads low when most of its steps are slow (a checkpoint save or a
    neighbour's burst of a few steps moves nothing). The baseline is the median of the
    last ``window`` block medians, and its spread is their robust sigma (1.4826 x MAD): a
    block is low when it is below the baseline by more than both ``drop`` x baseline and
    ``k`` x spread, so a series that is jumpy by nature (a shared machine) needs a
    proportionally larger drop. After the warm-up a block waits in ``pending`` (the
    confirmation window) before it joins the baseline: a drop confirms there (one odd
    block inside a long drop does not reset it), and low blocks of a drop that did not
    last join the baseline as the series' normal jitter. While open the baseline is
    frozen; the alert closes after ``recover`` blocks back above half the margin, or as
    ``new_level`` after ``max_open_points`` (the baseline restarts there).
    """
    if not math.isfinite(value):
        return []
    for legacy in ("ring", "below"):  # per-point state of the earlier rule
        state.pop(legacy, None)
    cur: list[float] = state.setdefault("cur", [])
    cur.append(value)
    if len(cur) < p["block"]:
        return []
    level = median(cur)
    cur.clear()
    blocks: list[float] = state.setdefault("blocks", [])
    pending: list[list[Any]] = state.setdefault("pending", [])  # [block median, low?] in arrival order
    o = state.get("open")
    if o:
        o["n"] = o.get("n", 0) + p["block"]
        o["low"] = min(o["low"], level)
        o["ok"] = o["ok"] + 1 if level >= o["recover"] else 0
        reason = "recovered" if o["ok"] >= p["recover"] else ("new_level" if o["n"] >= p["max_open_points"] else None)
        if reason is None:
            return []
        state["open"] = None
        if reason == "new_level":
            blocks.clear()
        return [Signal("throughput", "close", step, {"reason": reason, "lowest_block": o["low"], "points": o["n"],
                                                      "value": level, "baseline": o["baseline"]})]
    if len(blocks) < min(p["warmup"], p["window"]):
        _push(blocks, level, p["window"])
        return []
    base, mad = median_mad(blocks)
    spread = MAD_SIGMA * mad
    margin = max(p["drop"] * base, p["k"] * spread)
    pending.append([level, level < base - margin])
    lows = [b for b, low in pending if low]
    if len(lows) >= p["confirm"]:
        low = median(lows)
        first = step - len(pending) * p["block"] + 1
        pending.clear()
        state["open"] = {"baseline": base, "threshold": base - margin, "recover": base - margin / 2,
                         "low": low, "n": 0, "ok": 0, "from_step": first}
        return [Signal("throughput", "open", step, {
            "value": low, "baseline": base, "threshold": base - margin, "spread": spread,
            "drop": 1 - low / base if base else None, "points": len(lows) * p["block"], "from_step": first})]
    while len(pending) > p["confirm"] + p["confirm"] // 5 or (pending and not pending[0][1] and not lows):
        _push(blocks, pending.pop(0)[0], p["window"])  # leaves the confirmation window: normal variation
    return []


# --- run level: restarts and stalls -------------------------------------------------------------


def restart(state: dict[str, Any], p: dict[str, Any], ts: float, step: int | None) -> list[Signal]:
    """A resume at time ``ts``: ``count`` resumes within ``span_s`` open a restart-loop alert."""
    times: list[float] = state.setdefault("times", [])
    out: list[Signal] = []
    if state.get("open") and times and ts - times[-1] > p["span_s"]:
        state["open"] = False
        out.append(Signal("restart_loop", "close", step, {"reason": "quiet", "resumes": state.get("n", 0)}))
    times.append(ts)
    del times[: max(0, len(times) - int(p["count"]))]
    if state.get("open"):
        state["n"] = state.get("n", 0) + 1
        return out
    if len(times) >= p["count"] and times[-1] - times[0] <= p["span_s"]:
        state["open"], state["n"] = True, len(times)
        out.append(Signal("restart_loop", "open", step, {"resumes": len(times), "span_s": times[-1] - times[0],
                                                          "limit_span_s": p["span_s"]}))
    return out


def restart_quiet(state: dict[str, Any], p: dict[str, Any], now: float) -> list[Signal]:
    """Close an open restart-loop alert once ``span_s`` passed without a resume (periodic check)."""
    times = state.get("times") or []
    if state.get("open") and times and now - times[-1] > p["span_s"]:
        state["open"] = False
        return [Signal("restart_loop", "close", None, {"reason": "quiet", "resumes": state.get("n", 0)})]
    return []


def stalled(heartbeat_at: float | None, now: float, p: dict[str, Any]) -> bool:
    """Whether a running run with this last heartbeat (any event) counts as stalled."""
    return heartbeat_at is not None and now - heartbeat_at >= p["after_s"]


# --- wiring: which detectors read which role ---------------------------------------------------

# role -> [(config section, detector name used in the state key, update function)]
POINT_DETECTORS: dict[str, list[tuple[str, str, Callable[..., list[Signal]]]]] = {
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
ROLE_ORDER = {"loss": 0, "grad_norm": 1, "throughput": 2, "val_loss": 3}


def role_of(key: str, cfg: dict[str, Any]) -> str | None:
    """The role a metric key plays under ``cfg["keys"]`` (None: no detector reads it)."""
    for role, names in cfg["keys"].items():
        if key in names:
            return role
    return None


class SegmentRunner:
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
        tagged.sort(key=lambda t: (t[0], t[1], t[2]))
        enabled = {
            role: [(name, cfg[section], update) for section, name, update in detectors
                   if cfg[section].get("enabled", True)]
            for role, detectors in POINT_DETECTORS.items() if role in roles.values()
        }
        states, touched = self.states, self.touched
        out: list[Signal] = []
        for step, _, key, role, value in tagged:
            for name, params, update in enabled[role]:
                sk = (key, name)
                state = states.get(sk)
                if state is None:
                    state = states[sk] = {}
                last = state.get("last_step")
                if last is not None and step <= last:
                    continue
                state["last_step"] = step
                touched.add(sk)
                for sig in update(state, params, step, value, self.ctx):
                    sig.key = key
                    out.append(sig)
        return out


def inherit(state: dict[str, Any]) -> dict[str, Any]:
    """The state a resumed segment starts from: the previous segment's history, no open alert.

    A resume continues the same training, so its baseline is the one before the restart
    (this is how a blow-up right after a resume is seen).
    """
    out = {k: v for k, v in state.items()
           if k in ("ring", "blocks", "best", "best_step", "marks", "first", "last", "times", "segments")}
    for k in ("ring", "blocks"):
        if k in out:
            out[k] = list(out[k])
    return out
