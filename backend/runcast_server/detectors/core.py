"""The shared runner: which detectors read which metric role, and ``SegmentRunner``, which feeds them.

The detectors are incremental, O(1) work and memory per point, state as plain JSON, one
module per family: ``excursion`` (spike, grad norm), ``nonfinite``, ``plateau``,
``divergence``, ``throughput``, and ``runlevel`` (restart loop, stall), over ``stats``
and ``signals``. Each point detector is a ``PointDetector``,
``update(state, params, step, value, ctx) -> [Signal]``, over a JSON-able ``state`` dict
that it mutates. The runner calls each one's batched form, a ``BatchDetector``
(``update_many``: a key's points of a batch at once, with the same effect; the quiet case
inline, anything else through the point detector), or ``one_by_one`` where there is none
(issue 31: the per-point calls were half of the embedded server's ingest time). Memory per
series is bounded by the window parameters (at most 1000 floats), never by the run's
length, so the state can be stored in one database row and a restarted worker continues
where the last one stopped.

Points must come in step order per series: a point whose step is <= the last step the
detector has seen is ignored (a batch that arrives after a later one, or a redelivered
one, changes nothing).
"""

from __future__ import annotations

from bisect import bisect_right
from operator import itemgetter, lt
from typing import Any

from runcast_server.detectors.divergence import TRACE, TrainTrace, divergence_train_many, divergence_val_many
from runcast_server.detectors.excursion import excursion_up_many
from runcast_server.detectors.nonfinite import nonfinite_many
from runcast_server.detectors.plateau import plateau_many
from runcast_server.detectors.signals import BatchDetector, Signal, one_by_one
from runcast_server.detectors.throughput import throughput

# Which detectors read which role: role -> [(config section, detector name used in the state key, batched update)]
POINT_DETECTORS: dict[str, list[tuple[str, str, BatchDetector]]] = {
    "loss": [
        ("nonfinite", "nonfinite", nonfinite_many),
        ("spike", "spike", excursion_up_many("spike")),
        ("plateau", "plateau", plateau_many),
        ("divergence", "divergence", divergence_train_many),
    ],
    "val_loss": [("divergence", "divergence_val", divergence_val_many)],
    "grad_norm": [("nonfinite", "nonfinite", nonfinite_many), ("grad_norm", "grad_norm", excursion_up_many("grad_norm"))],
    "throughput": [("throughput", "throughput", one_by_one(throughput))],
}
ROLE_ORDER = {"loss": 0, "grad_norm": 1, "throughput": 2, "val_loss": 3}
Column = tuple[list[int], list[float]]
"""A key's points of a batch: its steps and its values, in batch order."""


def role_of(key: str, cfg: dict[str, Any]) -> str | None:
    """The role a metric key plays under ``cfg["keys"]`` (None: no detector reads it)."""
    for role, names in cfg["keys"].items():
        if key in names:
            return role
    return None


class SegmentRunner:
    """Feeds one segment's points to its detectors; ``states[(key, detector)]`` is the JSON state.

    ``feed_columns`` takes each key's points as columns, ``feed`` as (step, key, value) tuples;
    either in any order within a call. They are processed as if one by one
    in step order (loss before validation loss at one step, then by key; of one key's
    points at one step, the first), each series skipping steps it has already seen; each
    detector takes a key's points as a batch (``signals.BatchDetector``), the loss keys'
    before the validation keys': the validation check reads the smoothed train loss at its
    step from what the train trend recorded (``divergence.TrainTrace``).
    """

    def __init__(self, cfg: dict[str, Any], states: dict[tuple[str, str], dict[str, Any]]) -> None:
        self.cfg = cfg
        self.states = states
        self.ctx: dict[str, Any] = {}
        self.touched: set[tuple[str, str]] = set()

    def feed(self, points: list[tuple[int, str, float]]) -> list[Signal]:
        """``points``: (step, key, value). Returns the signals, in step order (``feed_columns`` of their keys' columns)."""
        columns: dict[str, Column] = {}
        for step, key, value in points:
            column = columns.get(key)
            if column is None:
                column = columns[key] = ([], [])
            column[0].append(step)
            column[1].append(value)
        return self.feed_columns(columns)

    def feed_columns(self, columns: dict[str, Column]) -> list[Signal]:
        """``columns``: key -> (steps, values) in batch order (not changed here). Returns the signals, in step order."""
        cfg = self.cfg
        if not cfg.get("enabled", True):
            return []
        series = _series(columns, cfg)
        ranked = sorted(series, key=lambda k: (ROLE_ORDER[series[k][0]], k))
        states, touched, ctx = self.states, self.touched, self.ctx
        ctx.pop("train_step", None)  # the order of this feed's smoothed train losses (``divergence_train_many``)
        if any(role == "val_loss" for role, _, _ in series.values()):
            ctx[TRACE] = TrainTrace(ctx.get("train_smoothed"))
        out: list[tuple[int, int, int, Signal]] = []
        try:
            for rank, key in enumerate(ranked):  # loss keys first: the validation check reads their trace
                role, steps, values = series[key]
                for index, (section, name, update) in enumerate(POINT_DETECTORS[role]):
                    params = cfg[section]
                    if not params.get("enabled", True):
                        continue
                    state = states.setdefault((key, name), {})
                    last = state.get("last_step")
                    start = 0 if last is None else bisect_right(steps, last)
                    if start == len(steps):
                        continue
                    state["last_step"] = steps[-1]
                    touched.add((key, name))
                    new_steps, new_values = (steps[start:], values[start:]) if start else (steps, values)
                    for step, sig in update(state, params, new_steps, new_values, ctx):
                        sig.key = key
                        out.append((step, rank, index, sig))
        finally:
            ctx.pop(TRACE, None)
        out.sort(key=_ORDER)
        return [sig for *_, sig in out]


_ORDER = itemgetter(0, 1, 2)  # step, then loss before validation loss, then key, then the detector


def _series(columns: dict[str, Column], cfg: dict[str, Any]) -> dict[str, tuple[str, list[int], list[float]]]:
    """key -> (role, steps, values) of the keys a detector reads: strictly increasing steps, the first
    point of a step kept (the point that one by one processing in step order would see)."""
    out: dict[str, tuple[str, list[int], list[float]]] = {}
    for key, (steps, values) in columns.items():
        role = role_of(key, cfg)
        if role is None or not steps:
            continue
        if not all(map(lt, steps, steps[1:])):
            order = sorted(range(len(steps)), key=steps.__getitem__)  # stable: the first of a step stays first
            kept = [i for n, i in enumerate(order) if n == 0 or steps[i] != steps[order[n - 1]]]
            steps, values = [steps[i] for i in kept], [values[i] for i in kept]
        out[key] = (role, steps, values)
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
