"""The run-level detectors: restart loops (on each resume, and a periodic quiet check) and stalls."""

from __future__ import annotations

from typing import Any, TypeGuard

from runcast_server.detectors.signals import Signal


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


def stalled(heartbeat_at: float | None, now: float, p: dict[str, Any]) -> TypeGuard[float]:
    """Whether a running run with this last heartbeat (any event) counts as stalled (never
    without a heartbeat: True also tells a type checker that ``heartbeat_at`` is a float)."""
    return heartbeat_at is not None and now - heartbeat_at >= p["after_s"]
