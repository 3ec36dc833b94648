"""What the reference trainer puts in its run's config for the run page: the parameter count
(the memory estimate) and, under DeepSpeed, the config in force (ZeRO stage, offload)."""

from __future__ import annotations

from pathlib import Path

import runcast
from runcast.integrations.deepspeed import load_config
from runcast.train.trainer import open_run

CONFIGS = Path(__file__).resolve().parents[2] / "examples" / "ds_configs"


def test_config_carries_parameter_count_and_zero_stage(tiny_cfg, monkeypatch):
    seen = {}
    monkeypatch.setattr(runcast, "init", lambda **kwargs: seen.update(kwargs) or object())
    cfg = tiny_cfg(server="http://127.0.0.1:9", token="t")
    open_run(cfg, 12345, None, lambda *_: None)
    assert seen["config"]["n_params"] == 12345 and "ds_config" not in seen["config"]
    assert "token" not in seen["config"]

    ds = load_config(CONFIGS / "zero2_offload.json", batch_size=4, accumulation=2, grad_clip=1.0)
    open_run(cfg, 12345, None, lambda *_: None, ds)
    zero = seen["config"]["ds_config"]["zero_optimization"]
    assert zero["stage"] == 2 and zero["offload_optimizer"]["device"] == "cpu"
