"""The shared runner: which detectors read which metric role, and ``SegmentRunner``, which feeds them.

The detectors are incremental, O(1) work and memory per point, state as plain JSON, one
module per family: ``excursion`` (spike, grad norm), ``nonfinite``, ``plateau``,
``divergence``, ``throughput``, and ``runlevel`` (restart loop, stall), over ``stats``
and ``signals``. Each point detector is a ``PointDetector``,
``update(state, params, step, value, ctx) -> [Signal]``, over a JSON-able ``state`` dict
that it mutates. Memory per series is bounded by the window parameters (at most 1000
floats), never by the run's length, so the state can be stored in one database row and a
restarted worker continues where the last one stopped.

Points must come in step order per series: a point whose step is <= the last step the
detector has seen is ignored (a batch that arrives after a later one, or a redelivered
one, changes nothing).
"""

from __future__ import annotations

from operator import itemgetter
from typing import Any

from runcast_server.detectors.divergence import divergence_train, divergence_val
from runcast_server.detectors.excursion import excursion_up
from runcast_server.detectors.nonfinite import nonfinite
from runcast_server.detectors.plateau import plateau
from runcast_server.detectors.signals import PointDetector, Signal
from runcast_server.detectors.throughput import throughput

# Which detectors read which role: role -> [(config section, detector name used in the state key, update function)]
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
