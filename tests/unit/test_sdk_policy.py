"""The publication policy's schema (shared by the SDK, the CLI and the server) and the SDK's checks."""

from __future__ import annotations

import pytest
import runcast
from runcast.wire.policy import DEFAULT, PolicyError, allows, check_policy, effective


def test_check_policy_accepts_each_setting_and_names_the_bad_one():
    assert check_policy({"metrics": "train/*, loss", "config": ["lr"], "code": "sha", "alerts": "team"}) == {
        "metrics": ["train/*", "loss"], "config": ["lr"], "code": "sha", "alerts": "team"}
    assert check_policy({"notes": None}) == {"notes": None}
    for body, field in (({"metrics": []}, "policy.metrics"), ({"env": "secret"}, "policy.env"),
                        ({"x": 1}, "policy.x"), ("all", "policy"), ({"config": ["a\x00"]}, "policy.config")):
        with pytest.raises(PolicyError) as info:
            check_policy(body)
        assert info.value.field == field


def test_the_wire_takes_json_values_only():
    """text=False (the API's bodies, run_started): no command-line text, which check_policy converts."""
    for body, field in (({"metrics": "train/*, loss"}, "policy.metrics"), ({"delay_s": "1.5"}, "policy.delay_s")):
        with pytest.raises(PolicyError) as info:
            check_policy(body, text=False)
        assert info.value.field == field
    assert check_policy({"metrics": "none", "config": ["lr"], "delay_s": 1.5}, text=False) == {
        "metrics": "none", "config": ["lr"], "delay_s": 1.5}


def test_layers_and_patterns():
    assert effective() == DEFAULT
    assert effective({"notes": "hidden", "metrics": ["a"]}, {"metrics": None, "env": "hidden"}) == {
        **DEFAULT, "notes": "hidden", "metrics": ["a"], "env": "hidden"}
    assert allows(["train/*"], "train/loss") and not allows(["train/*"], "val/loss")
    assert allows("all", "x") and not allows("none", "x")


def test_init_checks_the_policy_at_the_call(tmp_path):
    with pytest.raises(ValueError, match="policy.checkpoints"):
        runcast.init(project="p", mode="offline", spool_dir=str(tmp_path), policy={"checkpoints": "some"})
    run = runcast.init(project="p", mode="offline", spool_dir=str(tmp_path), policy={"notes": "hidden"},
                       capture_code=False)
    try:
        with pytest.raises(RuntimeError, match="needs a server"):
            run.set_policy(notes="shown")
        with pytest.raises(ValueError, match="policy.notes"):
            run.set_policy(notes="maybe")
    finally:
        run.finish(timeout=5)
    disabled = runcast.init(project="p", mode="disabled", policy={"notes": "hidden"})
    assert disabled.set_policy(notes="shown") is None
