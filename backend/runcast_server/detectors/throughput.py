"""The throughput drop: a sustained fall of the block medians below their baseline."""

from __future__ import annotations

import math
from typing import Any

from runcast_server.detectors.signals import Signal
from runcast_server.detectors.stats import MAD_SIGMA, median, median_mad, push


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
        push(blocks, level, p["window"])
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
        push(blocks, pending.pop(0)[0], p["window"])  # leaves the confirmation window: normal variation
    return []
