"""The plateau rule on sampled logs (docs/alerts.md, "The plateau rule"): a W&B export keeps a
few hundred points of a run, so a mark must describe its own points only and a slope must
be told from the series' noise before a healthy curve is called flat."""

from __future__ import annotations

import json
import random

import pytest
from runcast_server.detectors import config as dconfig
from runcast_server.detectors.core import SegmentRunner
from runcast_server.detectors.plateau import plateau

STEPS = 30_000


def sampled(seed: int, points: int, noise: float, flat_from: int | None = None) -> list[tuple[int, float]]:
    """``points`` steps of 30,000 drawn at random (as a W&B export keeps them) of a power-law
    loss with relative Gaussian noise, flat from ``flat_from`` on when it is given."""
    rng = random.Random(seed)
    steps = sorted(rng.sample(range(1, STEPS), points))
    return [(s, (2.0 + 8.0 * (min(s, flat_from or s) + 100) ** -0.4) * (1 + rng.gauss(0, noise))) for s in steps]


def plateau_opens(log: list[tuple[int, float]], overrides: dict | None = None, states: dict | None = None) -> list[int]:
    runner = SegmentRunner(dconfig.effective(overrides), {} if states is None else states)
    return [s.step for step, v in log for s in runner.feed([(step, "loss", v)]) if s.kind == "plateau" and s.phase == "open"]


def test_a_healthy_run_logged_as_500_sampled_points_does_not_read_as_flat():
    """Marks used to be a 50-point moving median: 3,000 steps of a sampled log, wider than the
    windows compared, so 5 of these 20 healthy runs raised a plateau."""
    assert [seed for seed in range(20) if plateau_opens(sampled(seed, 500, 0.01))] == []


def test_a_slope_within_the_noise_is_no_plateau():
    """With the noise test off (z 0), 15 of these 20 noisy sampled healthy runs read as flat."""
    logs = [sampled(seed, 300, 0.02) for seed in range(20)]
    assert sum(bool(plateau_opens(log, {"plateau": {"z": 0}})) for log in logs) >= 10
    assert [seed for seed, log in enumerate(logs) if plateau_opens(log)] == []


def test_a_plateau_in_a_sampled_log_is_found_when_its_points_show_it():
    """The loss stops improving at step 12,000, having fallen 2.6 % over the 6,000 steps
    before; 500 points with 0.5 % noise show it in 7 of these 10 runs (the other 3 stay
    quiet: their marks cannot tell it from a healthy slowing). The earlier rule opened
    too early on some of them, on the healthy stretch."""
    found = [plateau_opens(sampled(seed, 500, 0.005, flat_from=12_000)) for seed in range(10)]
    assert sum(bool(f) for f in found) >= 7
    assert all(12_000 < f[0] <= 12_000 + 12_000 for f in found if f)  # within the bench's lag


def test_every_step_plateau_is_found_with_the_noise_test_on():
    """A flat stretch of an every-step log with 1 % noise: the marks' noise is tiny, so the test costs nothing."""
    rng = random.Random(7)
    log = [(s, (2.0 + 8.0 * (min(s, 15_000) + 10) ** -0.5) * (1 + rng.gauss(0, 0.01))) for s in range(40_000)]
    [opened] = plateau_opens(log)
    assert 15_000 < opened <= 15_000 + 12_500


def test_the_plateau_state_survives_a_json_round_trip_mid_mark():
    log = sampled(3, 2000, 0.005, flat_from=12_000)
    whole = plateau_opens(log)
    states: dict = {}
    first = plateau_opens(log[:777], states=states)  # stops inside a mark and inside a block
    restored = {k: json.loads(json.dumps(v)) for k, v in states.items()}
    assert first + plateau_opens(log[777:], states=restored) == whole


def test_marks_stored_by_an_earlier_version_are_dropped_not_misread():
    """A state written before the marks carried their points and noise: the test waits for new marks."""
    old = {("loss", "plateau"): {"first": 0, "last_step": 8_000, "ring": [3.0] * 50, "acc": [6.0, 2], "n": 7000,
                                 "marks": [[1250 * i, 3.0 - 0.01 * i] for i in range(1, 7)]}}
    log = [(s, 2.9) for s in range(8_001, 12_000)]
    assert plateau_opens(log, states=old) == []
    assert all(len(m) == 5 for m in old[("loss", "plateau")]["marks"])


def test_marks_that_describe_one_step_give_no_slope_and_no_error():
    """A resume that recomputed steps can leave the marks of a window at one step; no slope, no alert."""
    p = dconfig.effective({"plateau": {"min_points": 1, "smooth": 1}})["plateau"]
    marks = [[10_000 + 1250 * i, 3.0 - 0.1 * i, 10_000.0, 1, 0.0] for i in range(9)]
    state = {"first": 0, "marks": marks, "block": [], "acc": [0.0, 0.0, 0.0, 0]}
    assert plateau(state, p, 10_000 + 1250 * 9, 2.2, {}) == []


def test_z_and_min_points_are_overrides_with_bounds():
    cfg = dconfig.effective({"plateau": {"z": 2, "min_points": 50}})
    assert (cfg["plateau"]["z"], cfg["plateau"]["min_points"]) == (2.0, 50)
    for bad, field in (({"plateau": {"z": -1}}, "alerts.plateau.z"), ({"plateau": {"min_points": 0}}, "alerts.plateau.min_points")):
        with pytest.raises(dconfig.ConfigError) as err:
            dconfig.validate_overrides(bad)
        assert err.value.field == field
