"""The batched detectors (issue 31) emit exactly what the per-point ones did and leave the same state.

The oracle is the per-point runner and detectors as they were (``detectors_oracle``, a copy
kept in the tests only). Random series with spikes, plateaus, a diverging stretch, NaN and
±Inf, gaps, repeated steps and shuffled points are cut into batches at random points and fed
both ways, under random (small) parameters that make every detector fire; the signals (kind,
phase, step, key, evidence, order) and every state must be identical after each batch.
"""

from __future__ import annotations

import json
import math
import random
from collections import Counter
from typing import Any

import pytest
from runcast_server.detectors import config as dconfig
from runcast_server.detectors.core import SegmentRunner
from runcast_server.detectors.stats import stored_state

from alerts.detectors_oracle import OldRunner

LOSS_KEYS = ("loss", "train/loss")


def params(rng: random.Random) -> dict[str, Any]:
    """Random overrides small enough that every detector fires on a few hundred points."""
    return {
        "spike": {"enabled": rng.random() < 0.9, "window": rng.randint(3, 60), "warmup": rng.randint(1, 8),
                  "k": rng.choice([2.0, 4.0, 8.0]), "min_rel": rng.choice([0.0, 0.05, 0.2]),
                  "confirm_points": rng.randint(1, 3), "recover_points": rng.randint(1, 4),
                  "max_open_points": rng.randint(3, 60)},
        "grad_norm": {"window": rng.randint(3, 40), "warmup": rng.randint(1, 6), "k": 4.0, "min_rel": 0.5,
                      "confirm_points": rng.randint(1, 2), "recover_points": rng.randint(1, 3),
                      "max_open_points": rng.randint(3, 40)},
        "nonfinite": {"enabled": rng.random() < 0.9},
        "plateau": {"enabled": rng.random() < 0.9, "smooth": rng.randint(1, 12), "window_steps": rng.randint(40, 400),
                    "warmup_steps": rng.randint(0, 150), "min_points": rng.randint(1, 20), "ratio": 0.3,
                    "min_rel": 0.001, "z": rng.choice([0.0, 1.0, 3.0])},
        "divergence": {"enabled": rng.random() < 0.9, "smooth": rng.randint(1, 40), "rise": rng.choice([0.01, 0.05]),
                       "confirm": rng.randint(1, 6), "val_rising_evals": rng.randint(1, 3), "val_min_rel": 0.01},
        "throughput": {"block": rng.randint(1, 6), "window": rng.randint(3, 20), "warmup": rng.randint(1, 10),
                       "confirm": rng.randint(1, 4), "recover": rng.randint(1, 3), "max_open_points": rng.randint(5, 80)},
    }


def loss_curve(rng: random.Random, n: int) -> list[float]:
    """A falling loss with noise, spikes of 1-6 points, a flat stretch, a rise, NaN and ±Inf."""
    flat_at, rise_at = rng.randint(0, n), rng.randint(0, n)
    out, level = [], 3.0
    for i in range(n):
        if not flat_at <= i < flat_at + n // 4:
            level *= 0.998 if not rise_at <= i < rise_at + n // 6 else 1.01
        v = level + rng.gauss(0, 0.02 * level)
        r = rng.random()
        if r < 0.02:
            v *= rng.choice([2.0, 5.0, 50.0])
        elif r < 0.025:
            v = rng.choice([math.nan, math.inf, -math.inf])
        out.append(v)
    for _ in range(rng.randint(0, 3)):  # a spike lasting a few points
        at, width = rng.randint(0, n - 1), rng.randint(2, 8)
        out[at:at + width] = [x * 4 for x in out[at:at + width]]
    return out


def points(rng: random.Random, n: int) -> list[tuple[int, str, float]]:
    """A run's points in logging order: gaps, repeated steps, 1-5 keys, validation every few steps."""
    keys = rng.sample(LOSS_KEYS, rng.randint(1, 2)) + [k for k in ("grad_norm", "tokens_per_s", "other") if rng.random() < 0.5]
    curves = {k: loss_curve(rng, n) for k in keys}
    curves["tokens_per_s"] = [abs(v) * 1e4 if math.isfinite(v) else v for v in curves.get("tokens_per_s", [])]
    if rng.random() < 0.3:  # coarse values: ties with the median and the thresholds
        curves = {k: [round(v, 1) if math.isfinite(v) else v for v in c] for k, c in curves.items()}
    val_every = rng.choice([0, 1, 5, 37])
    out, step = [], rng.randint(0, 5)
    for i in range(n):
        for k in keys:
            if rng.random() < 0.95:
                out.append((step, k, curves[k][i]))
        if val_every and i % val_every == 0:  # falls, then rises from the middle on (overfitting)
            val = 2.0 * 0.999 ** min(i, n // 2) * (1 + 0.004 * max(0, i - n // 2)) * (1 + rng.gauss(0, 0.001))
            out.append((step, "val/loss", val))
        r = rng.random()
        if r < 0.05:
            out.append((step, keys[0], rng.random() * 10))  # the same step again, another value
        step += 1 if r < 0.9 else (0 if r < 0.95 else rng.randint(2, 300))
    return out


def batches(rng: random.Random, pts: list[tuple[int, str, float]]) -> list[list[tuple[int, str, float]]]:
    """Cut at random points; some batches shuffled, some sent again (a redelivery), some out of order."""
    cuts = sorted(rng.sample(range(1, len(pts)), min(len(pts) - 1, rng.randint(0, 12))))
    out = [pts[a:b] for a, b in zip([0, *cuts], [*cuts, len(pts)])]
    for b in out:
        if rng.random() < 0.3:
            rng.shuffle(b)
    if len(out) > 2 and rng.random() < 0.3:
        i = rng.randrange(len(out) - 1)
        out.insert(i + 2, list(out[i]))  # a batch redelivered after the next one
    if len(out) > 2 and rng.random() < 0.2:
        i = rng.randrange(len(out) - 1)
        out[i], out[i + 1] = out[i + 1], out[i]  # a later batch stored first
    return out


def dump(x: Any) -> str:
    return json.dumps(x, sort_keys=True, allow_nan=True)


def signals(sigs: list[Any]) -> list[str]:
    return [dump([s.kind, s.phase, s.step, s.key, s.evidence]) for s in sigs]


def states(st: dict[tuple[str, str], dict[str, Any]]) -> dict[tuple[str, str], str]:
    return {k: dump(stored_state(v)) for k, v in st.items()}


@pytest.mark.parametrize("seed", range(80))
def test_batched_detectors_match_the_per_point_ones(seed: int) -> None:
    rng = random.Random(seed)
    cfg = dconfig.effective(params(rng))
    pts = points(rng, rng.randint(50, 900))
    keep_runner = rng.random() < 0.5  # one runner for all (its ctx carries over), or a runner per batch, states via JSON
    old_states: dict[tuple[str, str], dict[str, Any]] = {}
    new_states: dict[tuple[str, str], dict[str, Any]] = {}
    old, new = OldRunner(cfg, old_states), SegmentRunner(cfg, new_states)
    for batch in batches(rng, pts):
        if rng.random() < 0.1:  # the parameters changed between batches (PUT .../alerts/config)
            cfg = dconfig.effective(params(rng))
            old.cfg = new.cfg = cfg
        if not keep_runner:
            old_states = {k: json.loads(dump(stored_state(v))) for k, v in old_states.items()}
            new_states = {k: json.loads(dump(stored_state(v))) for k, v in new_states.items()}
            old, new = OldRunner(cfg, old_states), SegmentRunner(cfg, new_states)
        want, got = old.feed(list(batch)), new.feed(list(batch))
        assert signals(got) == signals(want)
        assert states(new_states) == states(old_states)
        assert new.touched == old.touched
        assert new.ctx.get("train_smoothed") == old.ctx.get("train_smoothed")


def test_the_random_series_make_every_detector_fire() -> None:
    """The property above is only as good as the signals it compares: each kind opens and closes."""
    seen: Counter[tuple[str, str]] = Counter()
    modes: Counter[str] = Counter()
    for seed in range(80):
        rng = random.Random(seed)
        cfg = dconfig.effective(params(rng))
        pts = points(rng, rng.randint(50, 900))
        runner = SegmentRunner(cfg, {})
        for batch in batches(rng, pts):
            for s in runner.feed(list(batch)):
                seen[(s.kind, s.phase)] += 1
                modes[s.evidence.get("mode", "")] += 1
    kinds = ("spike", "nonfinite", "plateau", "divergence", "grad_norm", "throughput")
    assert {k for k, _ in seen} >= set(kinds), seen
    assert all(seen[(k, "close")] for k in ("spike", "nonfinite", "divergence", "grad_norm")), seen
    assert modes["overfit"] and modes["train_trend"], modes


def both(cfg: dict[str, Any], batches: list[list[tuple[int, str, float]]],
         start: dict[tuple[str, str], dict[str, Any]] | None = None) -> None:
    """Feed ``batches`` to one old and one new runner (from copies of ``start``): the same signals, states, ctx."""
    old_states, new_states = json.loads(dump_states(start)), json.loads(dump_states(start))
    old = OldRunner(cfg, {tuple(k.split("|")): v for k, v in old_states.items()})  # type: ignore[misc]
    new = SegmentRunner(cfg, {tuple(k.split("|")): v for k, v in new_states.items()})  # type: ignore[misc]
    for batch in batches:
        assert signals(new.feed(batch)) == signals(old.feed(batch))
        assert states(new.states) == states(old.states)
        assert new.ctx.get("train_smoothed") == old.ctx.get("train_smoothed")


def dump_states(st: dict[tuple[str, str], dict[str, Any]] | None) -> str:
    return dump({"|".join(k): v for k, v in (st or {}).items()})


def test_two_loss_keys_a_later_feed_at_earlier_steps_sets_the_smoothed_loss() -> None:
    """One runner, several feeds: the validation check reads the smoothed loss the last loss point set,
    whatever its step, as the point by point runner did."""
    cfg = dconfig.effective({"divergence": {"smooth": 4, "val_rising_evals": 1}})
    both(cfg, [[(s, "train/loss", 1.0 + s) for s in range(100, 104)], [(s, "loss", 2.0 + s) for s in range(50, 54)],
               [(104, "val/loss", 3.0)], [(60, "loss", 2.5), (105, "val/loss", 3.5), (105, "train/loss", 0.5)]])


def test_a_stored_plateau_state_of_an_earlier_version_is_reset_as_before() -> None:
    """Marks of one value and a short accumulator (an earlier version's state), the batch opening with a
    NaN and steps in the warm-up: the batched path checks them where the point detector did."""
    cfg = dconfig.effective({"plateau": {"smooth": 2, "min_points": 1, "window_steps": 80, "warmup_steps": 30}})
    start = {("loss", "plateau"): {"first": 0, "last_step": 9, "marks": [[5.0], [6.0]], "block": [[8, 2.0]], "acc": [1.0, 2]}}
    curve = [(s, "loss", 3.0 * 0.99 ** s) for s in range(10, 400)]
    both(cfg, [[(10, "loss", math.nan), *curve[1:]]], start)
    late = {("loss", "plateau"): {**start[("loss", "plateau")], "first": 5}}
    both(cfg, [[(10, "loss", 1.0), *curve[1:]]], late)
