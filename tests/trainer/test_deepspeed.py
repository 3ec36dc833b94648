"""The DeepSpeed path of the reference trainer, for real on the CPU (gloo, torch_adam).

The first DeepSpeed process on a machine compiles a small comm op (1-2 minutes; the module fixture
builds it first, with a deadline); it is kept in ~/.cache/runcast-torch-extensions (or
$TORCH_EXTENSIONS_DIR) for later runs.
"""

from __future__ import annotations

import math
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

pytest.importorskip("deepspeed")

from runcast.integrations.deepspeed import engine_metrics, load_config  # noqa: E402
from runcast.train import train  # noqa: E402

pytestmark = pytest.mark.slow
CONFIGS = Path(__file__).resolve().parents[2] / "examples" / "ds_configs"


@pytest.fixture(autouse=True)
def one_process_world(monkeypatch):
    """Outside a launcher the trainer sets these itself; keep them from leaking into other tests."""
    for key in ("RANK", "LOCAL_RANK", "WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT"):
        monkeypatch.delenv(key, raising=False)
    monkeypatch.setenv("TORCH_EXTENSIONS_DIR", os.environ.get("TORCH_EXTENSIONS_DIR", str(Path.home() / ".cache" / "runcast-torch-extensions")))
    yield
    for key in ("RANK", "LOCAL_RANK", "WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT"):
        os.environ.pop(key, None)


STALE_LOCK_S = 600  # a compile takes a minute or two; an older lock is a killed build's


@pytest.fixture(scope="module", autouse=True)
def shm_comm_op_built():
    """Build DeepSpeed's CPU comm op once, bounded, before any test trains.

    torch's JIT build waits, without limit, while a ``lock`` file sits in the build directory, and a build
    killed mid-way (a timeout, a kill -9) leaves one behind: every later DeepSpeed process on the machine
    would then hang. Clear such a leftover, and build in a child with a deadline so a failure shows the
    compiler's output instead of a hang.
    """
    root = Path(os.environ.get("TORCH_EXTENSIONS_DIR", Path.home() / ".cache" / "runcast-torch-extensions"))
    lock = root / "deepspeed_shm_comm" / "lock"

    def clear_stale() -> None:
        if lock.exists() and time.time() - lock.stat().st_mtime > STALE_LOCK_S:
            lock.unlink(missing_ok=True)

    clear_stale()
    env = {**os.environ, "TORCH_EXTENSIONS_DIR": str(root)}
    try:
        built = subprocess.run(
            [sys.executable, "-c", "from deepspeed.comm.torch import build_shm_op; build_shm_op()"],
            env=env, capture_output=True, text=True, timeout=420,
        )
    except subprocess.TimeoutExpired as exc:
        lock.unlink(missing_ok=True)  # the killed child's
        pytest.fail(f"building DeepSpeed's comm op took over {exc.timeout} s")
    if built.returncode != 0:
        pytest.fail(f"building DeepSpeed's comm op failed:\n{built.stdout[-3000:]}\n{built.stderr[-3000:]}")


def quiet(*_):
    pass


@pytest.mark.parametrize("config", ["zero2_offload.json", "zero1_fp32.json", "zero3_bf16.json"])
def test_trains_and_checkpoints_through_deepspeed(config, tiny_cfg, recording_run):
    result = train(tiny_cfg(deepspeed=str(CONFIGS / config), max_steps=8), recording_run, log=quiet)
    losses = [result["losses"][s] for s in range(1, 9)]
    assert all(math.isfinite(x) for x in losses) and losses[-1] < losses[0]
    first = recording_run.of("log")[0][0][0]
    assert {"train/loss", "lr", "grad_norm", "skipped_steps", "tokens_seen"} <= set(first)
    assert "loss_scale" not in first  # bf16 and fp32 have no loss scaling
    assert first["skipped_steps"] == 0 and math.isfinite(first["grad_norm"]) and first["grad_norm"] > 0
    ckpts = [(k["step"], k.get("status", "available")) for a, k in recording_run.of("checkpoint")]
    assert ckpts[:2] == [(4, "available"), (8, "available")]
    assert Path(result["checkpoints"][-1]["path"], "runcast_state.pt").exists()  # a directory checkpoint


def test_accumulation_from_config_and_exact_resume(tiny_cfg, tmp_path, recording_run):
    cfg = tiny_cfg(deepspeed=str(CONFIGS / "zero2_bf16_accum.json"), max_steps=8, keep_last=2)
    full = train(cfg, recording_run, log=quiet)
    first = recording_run.of("log")[0][0][0]
    assert first["tokens_seen"] == 4 * 32 * 2  # micro-batch 4 x context 32 x accumulation 2
    resumed = train(
        tiny_cfg(deepspeed=cfg.deepspeed, max_steps=8, out_dir=str(tmp_path / "b"), resume=str(tmp_path / "out" / "ckpt_0000004")),
        None,
        log=quiet,
    )
    assert [resumed["losses"][s] for s in range(5, 9)] == pytest.approx([full["losses"][s] for s in range(5, 9)], abs=1e-6)
    assert resumed["val"] == pytest.approx(full["val"], abs=1e-6)


def test_config_auto_values_are_filled(tmp_path):
    cfg = load_config(CONFIGS / "zero2_offload.json", batch_size=6, accumulation=3, grad_clip=0.5)
    assert cfg["train_micro_batch_size_per_gpu"] == 6 and cfg["gradient_accumulation_steps"] == 3
    assert cfg["gradient_clipping"] == 1.0  # set in the file: the file wins
    assert cfg["zero_optimization"]["offload_optimizer"]["device"] == "cpu"
    assert cfg["optimizer"]["params"]["torch_adam"] is True


def test_engine_metrics_reads_fp16_loss_scale():
    class Fp16Optimizer:
        cur_scale = 65536.0

    class Engine:  # the attributes DeepSpeed's engine exposes, as after an fp16 overflow
        skipped_steps = 2
        optimizer = Fp16Optimizer()

        def get_lr(self):
            return [3e-4]

        def get_global_grad_norm(self):
            return float("inf")

        def fp16_enabled(self):
            return True

    assert engine_metrics(Engine()) == {"lr": 3e-4, "grad_norm": float("inf"), "skipped_steps": 2.0, "loss_scale": 65536.0}


def test_watch_monitor_sends_what_the_engine_reports_and_keeps_its_monitors(receiver, tmp_path):
    import deepspeed
    import runcast
    import torch
    from runcast.integrations.deepspeed import (
        init_cpu_distributed,
        monitor_key,
        watch_monitor,
    )

    init_cpu_distributed()
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.ReLU(), torch.nn.Linear(16, 1))
    config = {
        "train_micro_batch_size_per_gpu": 4, "gradient_accumulation_steps": 1,
        "optimizer": {"type": "Adam", "params": {"lr": 1e-3, "torch_adam": True}},
        "wall_clock_breakdown": True,
        "csv_monitor": {"enabled": True, "output_path": str(tmp_path / "csv"), "job_name": "job"},
    }
    engine, *_ = deepspeed.initialize(model=model, model_parameters=model.parameters(), config=config)
    run = runcast.init("ds", "monitor", server=receiver.url, token="t", spool_dir=str(tmp_path / "spool"),
                       capture_code=False)
    watch_monitor(engine, run)
    assert watch_monitor(engine, run) is engine.monitor  # installed once
    x = torch.randn(16, 8)
    for i in range(4):
        batch = x[4 * i : 4 * i + 4]
        loss = torch.nn.functional.mse_loss(engine(batch), batch.sum(1, keepdim=True))
        engine.backward(loss)
        engine.step()
        run.log({"train/loss": loss.item()}, step=engine.global_steps)
    run.finish()

    by_key: dict[str, dict[int, float]] = {}
    for e in receiver.of_type("metrics"):
        for k, v in e["values"].items():
            by_key.setdefault(k, {})[e["step"]] = v
    assert by_key["lr"] == {1: 1e-3, 2: 1e-3, 3: 1e-3, 4: 1e-3}
    assert by_key["samples_seen"] == {1: 4.0, 2: 8.0, 3: 12.0, 4: 16.0}
    assert {"time/forward_ms", "time/backward_ms", "time/step_ms"} <= set(by_key)
    assert set(by_key["time/step_ms"]) == {1, 2, 3, 4}
    assert "loss_scale" not in by_key  # fp32: no loss scaling
    assert (tmp_path / "csv" / "job" / "Train_Samples_lr.csv").is_file()  # the configured monitor still writes
    assert monitor_key("Train/Samples/train_loss") == "train/loss" and monitor_key("Train/Eval/x") == "deepspeed/x"
