"""Each detector on constructed series: all NaN, constant, one point, steps out of order,
and the anomaly it exists for (one alert per anomaly, with evidence)."""

from __future__ import annotations

import json
import math

import pytest
from runcast.wire.limits import MAX_INT
from runcast_server.detectors import config as dconfig
from runcast_server.detectors.core import SegmentRunner, inherit
from runcast_server.detectors.runlevel import restart, restart_quiet, stalled

from alerts.helpers import loss_curve


def feed(series: dict[str, list[float]], cfg: dict | None = None, steps: list[int] | None = None,
         states: dict | None = None) -> list[tuple[str, str, int | None]]:
    runner = SegmentRunner(cfg or dconfig.effective(None), {} if states is None else states)
    n = max(len(v) for v in series.values())
    out = []
    for i in range(n):
        step = steps[i] if steps else i
        pts = [(step, k, v[i]) for k, v in series.items() if i < len(v) and not (isinstance(v[i], float) and math.isnan(v[i]) and k == "val/loss")]
        out += [(s.kind, s.phase, s.step) for s in runner.feed(pts)]
    return out


def test_all_nan_opens_one_nonfinite_alert_and_nothing_else():
    assert feed({"loss": [math.nan] * 500}) == [("nonfinite", "open", 0)]


def test_constant_series_raises_nothing():
    assert feed({"loss": [2.5] * 3000, "grad_norm": [1.0] * 3000, "tokens_per_s": [1e5] * 3000}) == []


def test_single_point_raises_nothing_and_remembers_its_step():
    states: dict = {}
    assert feed({"loss": [3.0]}, states=states) == []
    assert states[("loss", "spike")]["last_step"] == 0


def test_steps_at_or_below_the_last_seen_are_ignored():
    states: dict = {}
    runner = SegmentRunner(dconfig.effective(None), states)
    assert runner.feed([(s, "loss", 2.0) for s in range(100, 120)]) == []
    # an out-of-order (older) batch carrying a huge value changes nothing
    assert runner.feed([(50, "loss", 100.0), (119, "loss", 100.0)]) == []
    assert states[("loss", "spike")]["last_step"] == 119
    # a newer step still counts (a spike opens once the next point confirms it, dated at its first)
    assert runner.feed([(120, "loss", 100.0)]) == []
    assert [(s.kind, s.phase, s.step) for s in runner.feed([(121, "loss", 100.0)])] == [("spike", "open", 120)]


def test_one_batch_loss_jump_back_at_once_is_not_a_spike():
    """A healthy run logs single-point jumps (one hard batch; the next loss is normal) every few
    hundred steps, as the modded-nanogpt logs in data/real show: no alert; a jump that lasts two
    points opens, dated at its first point, its evidence saying when it was confirmed."""
    curve = loss_curve(600, seed=3)
    blip = list(curve)
    blip[400] *= 1.9
    assert feed({"loss": blip}) == []
    two = list(curve)
    two[400] *= 1.9
    two[401] *= 1.4
    runner = SegmentRunner(dconfig.effective(None), {})
    sigs = [s for i, v in enumerate(two) for s in runner.feed([(i, "loss", v)])]
    assert [(s.kind, s.phase, s.step) for s in sigs][:1] == [("spike", "open", 400)]
    assert sigs[0].evidence["value"] == two[400] and sigs[0].evidence["confirmed_step"] == 401
    # confirm_points 1 opens on the jump itself
    assert feed({"loss": blip}, cfg=dconfig.effective({"spike": {"confirm_points": 1}}))[:1] == [("spike", "open", 400)]


def test_a_spike_candidate_survives_a_worker_restart_between_its_two_points():
    curve = loss_curve(600, seed=3, spike=(400, 20, 0.8))
    whole = feed({"loss": curve})
    states: dict = {}
    first = feed({"loss": curve[:401]}, states=states)
    assert first == [] and states[("loss", "spike")]["pending"]["step"] == 400
    restored = {k: json.loads(json.dumps(v)) for k, v in states.items()}
    second = feed({"loss": curve[401:]}, steps=list(range(401, 600)), states=restored)
    assert first + second == whole and whole[0] == ("spike", "open", 400)


def test_spike_is_one_alert_with_evidence_and_closes_on_recovery():
    curve = loss_curve(600, seed=3, spike=(400, 50, 0.8))
    runner = SegmentRunner(dconfig.effective(None), {})
    sigs = [s for i, v in enumerate(curve) for s in runner.feed([(i, "train/loss", v)])]
    assert [(s.kind, s.phase, s.step) for s in sigs] == [("spike", "open", 400), ("spike", "close", 452)]
    opened, closed = sigs[0].evidence, sigs[1].evidence
    assert opened["value"] == curve[400]
    assert opened["baseline"] < opened["threshold"] < opened["value"]
    assert closed["reason"] == "recovered" and closed["points"] == 52
    assert sigs[0].key == "train/loss"


def test_state_survives_a_json_round_trip_like_a_worker_restart():
    curve = loss_curve(700, seed=4, spike=(500, 10, 1.0))
    whole = feed({"loss": curve})
    states: dict = {}
    first = feed({"loss": curve[:300]}, states=states)
    restored = {k: json.loads(json.dumps(v)) for k, v in states.items()}
    second = feed({"loss": curve[300:]}, steps=list(range(300, 700)), states=restored)
    assert first + second == whole
    assert [k for k, ph, _ in whole if ph == "open"] == ["spike"]


def test_grad_norm_explosion():
    g = [1.0 + 0.05 * math.sin(i) for i in range(300)]
    for i in range(200, 205):
        g[i] = 80.0
    assert feed({"grad_norm": g}) == [("grad_norm", "open", 200), ("grad_norm", "close", 207)]


def test_nonfinite_grad_norm_and_loss():
    loss = [2.0] * 100
    loss[50] = math.inf
    g = [1.0] * 100
    g[70] = math.nan
    assert feed({"loss": loss, "grad_norm": g}) == [
        ("nonfinite", "open", 50), ("nonfinite", "close", 51), ("nonfinite", "open", 70), ("nonfinite", "close", 71),
    ]


def test_throughput_sustained_drop_opens_once_and_closes_on_recovery():
    t = [1000.0 + 10 * math.sin(i) for i in range(1000)]
    for i in range(100, 1000, 100):
        t[i] = 400.0  # slow checkpoint steps: no alert
    for i in range(400, 700):
        t[i] = 500.0  # a sustained halving: 300 steps
    runner = SegmentRunner(dconfig.effective(None), {})
    sigs = [s for i, v in enumerate(t) for s in runner.feed([(i, "tokens_per_s", v)])]
    # blocks of 10 points: the 10th low block ends at step 499; the 3rd recovered block at 729
    assert [(s.kind, s.phase, s.step) for s in sigs] == [("throughput", "open", 499), ("throughput", "close", 729)]
    opened = sigs[0].evidence
    assert opened["value"] == 500.0 and opened["from_step"] == 400 and opened["points"] == 100
    assert opened["drop"] == pytest.approx(0.5, abs=0.01)
    assert sigs[1].evidence["reason"] == "recovered"


def test_throughput_jitter_of_a_busy_neighbour_never_fires():
    # bursts of 1..90 slow steps (down to a fifth), separated by normal stretches as long
    t, i, burst = [], 0, 1
    while len(t) < 5000:
        t += [1000.0] * (burst + 5) + [1000.0 * (0.2 + 0.6 * (burst % 3) / 2)] * burst
        burst = burst % 84 + 7  # up to 90 steps: fewer than `confirm` (10) low blocks, whatever the alignment
    assert feed({"tokens_per_s": t}) == []


def test_throughput_drop_shorter_than_confirm_blocks_is_ignored_and_joins_the_baseline():
    t = [1000.0] * 600
    t[300:390] = [300.0] * 90  # 9 low blocks: one short of confirming
    states: dict = {}
    assert feed({"tokens_per_s": t}, states=states) == []
    assert states[("tokens_per_s", "throughput")]["blocks"].count(300.0) == 9


def test_throughput_on_a_noisy_series_needs_a_drop_beyond_its_spread():
    # block medians that wander +-10% around 1000 (robust sigma ~10%): a 35% drop is within k sigmas
    base = [1000.0 * (1 + 0.1 * math.sin(i / 37)) for i in range(1200)]
    drop = [v * 0.65 if 900 <= i < 1100 else v for i, v in enumerate(base)]
    assert feed({"tokens_per_s": drop}) == []
    # ... and an 80% drop is not
    drop = [v * 0.2 if 900 <= i < 1100 else v for i, v in enumerate(base)]
    assert [(k, ph) for k, ph, _ in feed({"tokens_per_s": drop})] == [("throughput", "open"), ("throughput", "close")]


def test_plateau_after_the_loss_stops_improving():
    loss = [2.0 + 8.0 * (i + 10) ** -0.5 for i in range(40_000)]
    flat = loss[15_000]
    loss[15_000:] = [flat] * 25_000
    got = feed({"loss": loss})
    assert [(k, ph) for k, ph, _ in got] == [("plateau", "open")]
    assert 15_000 < got[0][2] <= 15_000 + 12_500  # within 1.25 windows of the start


def test_divergence_train_loss_trending_up():
    loss = [2.0 + 8.0 * (i + 10) ** -0.5 for i in range(3000)]
    for i in range(2000, 3000):
        loss[i] *= 1 + 0.3 * (i - 2000) / 500 if i < 2500 else 1.3
    got = feed({"loss": loss})
    assert [(k, ph) for k, ph, _ in got] == [("divergence", "open")]
    assert 2000 < got[0][2] < 2400


def test_divergence_validation_rising_while_train_falls():
    loss = [2.0 + 8.0 * (i + 10) ** -0.5 for i in range(6000)]
    val = [math.nan] * 6000
    for i in range(250, 6000, 250):
        val[i] = loss[i] * 1.05 * (1 + (0.03 * (i - 4000) / 250 if i > 4000 else 0))
    got = feed({"loss": loss, "val/loss": val})
    assert got == [("divergence", "open", 4750)]


def test_restart_loop_opens_once_and_closes_when_quiet():
    p = dconfig.DEFAULTS["restart_loop"]
    state: dict = {}
    assert restart(state, p, 0.0, 100) == []
    assert restart(state, p, 20_000.0, 200) == []
    assert restart(state, p, 20_300.0, 200) == []
    [sig] = restart(state, p, 20_600.0, 200)
    assert (sig.kind, sig.phase, sig.evidence["resumes"]) == ("restart_loop", "open", 3)
    assert restart(state, p, 20_700.0, 200) == []  # still the same loop
    assert restart_quiet(state, p, 21_000.0) == []
    assert [s.phase for s in restart_quiet(state, p, 20_700.0 + 3601)] == ["close"]


def test_stall_predicate():
    p = {"after_s": 600.0}
    assert not stalled(None, 10_000.0, p)
    assert not stalled(9_500.0, 10_000.0, p)
    assert stalled(9_400.0, 10_000.0, p)


def test_resumed_segment_inherits_history_but_not_open_alerts():
    curve = loss_curve(300, seed=5)
    states: dict = {}
    feed({"loss": curve}, states=states)
    resumed = {k: inherit(v) for k, v in states.items()}
    # a blow-up right after the resume is measured against the pre-resume baseline
    got = feed({"loss": [10.0, 10.0]}, steps=[300, 301], states=resumed)
    assert ("spike", "open", 300) in got


def test_overrides_are_validated_and_merged():
    cfg = dconfig.effective({"spike": {"k": 12, "min_rel": 0.5}, "stall": False, "keys": {"loss": "my_loss"}})
    assert cfg["spike"]["k"] == 12.0 and cfg["spike"]["window"] == 50
    assert cfg["stall"]["enabled"] is False
    assert cfg["keys"]["loss"] == ["my_loss"]
    for bad in ({"nope": {}}, {"spike": {"kk": 1}}, {"spike": {"window": 0}}, {"keys": {"x": ["a"]}}, []):
        with pytest.raises(dconfig.ConfigError):
            dconfig.validate_overrides(bad)
    assert dconfig.effective({"nope": 1}) == dconfig.effective(None)  # invalid as a whole: defaults


def test_the_schema_of_overrides_has_every_bound_validate_overrides_checks():
    """The OpenAPI body of PUT /alerts/config (overrides_schema): each parameter's bound holds,
    one past it does not, and it names exactly the detectors, parameters and roles there are."""
    schema = dconfig.overrides_schema()
    assert set(schema["properties"]) == {"enabled", "keys", *dconfig.DETECTORS}
    assert set(schema["properties"]["keys"]["properties"]) == set(dconfig.ROLES)
    for detector in dconfig.DETECTORS:
        params = schema["properties"][detector]["anyOf"][1]["properties"]
        assert set(params) == set(dconfig.DEFAULTS[detector])
        for param, bound in params.items():
            if bound["type"] == "boolean":
                good, bad = [True], [1]
            elif bound["type"] == "integer":  # up to MAX_INT: the route's check_json bound
                good, bad = [bound["minimum"], bound["maximum"]], [bound["minimum"] - 1, 1.5]
                bad += [] if bound["maximum"] == MAX_INT else [bound["maximum"] + 1]
            else:
                good, bad = [bound["minimum"], bound["maximum"]], [-0.5, bound["maximum"] * 2, True]
            for value in good:
                dconfig.validate_overrides({detector: {param: value}})
            for value in bad:
                with pytest.raises(dconfig.ConfigError):
                    dconfig.validate_overrides({detector: {param: value}})
    dconfig.validate_overrides({"keys": {"loss": ["x"] * dconfig.MAX_KEY_NAMES}})
    with pytest.raises(dconfig.ConfigError):
        dconfig.validate_overrides({"keys": {"loss": ["x"] * (dconfig.MAX_KEY_NAMES + 1)}})


def test_disabled_detectors_stay_quiet():
    cfg = dconfig.effective({"enabled": False})
    assert feed({"loss": [1.0] * 20 + [50.0]}, cfg=cfg) == []
    cfg = dconfig.effective({"spike": False})
    assert feed({"loss": [1.0] * 20 + [50.0]}, cfg=cfg) == []
