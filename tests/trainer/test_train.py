"""The reference trainer: losses, the mix schedule, checkpoints with retention, exact resume, faults."""

from __future__ import annotations

import os
import subprocess
import sys
from dataclasses import asdict
from pathlib import Path

import pytest

from runcast.train import TrainConfig, get_lr, train
from runcast.train import checkpoint as ckpt


def quiet(*_):
    pass


def test_resume_reproduces_the_uninterrupted_run_bit_for_bit(tiny_cfg, tmp_path, recording_run):
    full = train(tiny_cfg(keep_last=3, mix="0:code=0.7,prose=0.3;6:code=0.2,prose=0.8"), recording_run, log=quiet)
    resumed_run = type(recording_run)()
    resumed = train(
        tiny_cfg(out_dir=str(tmp_path / "b"), resume=str(tmp_path / "out" / "ckpt_0000004.pt")),
        resumed_run,
        log=quiet,
    )
    assert sorted(resumed["losses"]) == list(range(5, 13))
    assert [resumed["losses"][s] for s in range(5, 13)] == [full["losses"][s] for s in range(5, 13)]
    assert resumed["val"] == full["val"]
    # the saved config (mix schedule, keep_last) came back with the checkpoint
    mixes = [(k["step"], a[0]["code"]) for a, k in resumed_run.of("data_mix")]
    assert mixes == [(4, pytest.approx(0.7)), (6, pytest.approx(0.2))]
    assert resumed_run.of("manifest") == []  # same data as the checkpoint: no new manifest version


def test_metrics_every_step_and_val_every_k(tiny_cfg, recording_run):
    train(tiny_cfg(), recording_run, log=quiet)
    logged = recording_run.of("log")
    train_steps = [k["step"] for a, k in logged if "train/loss" in a[0]]
    val_steps = [k["step"] for a, k in logged if "val/loss" in a[0]]
    assert train_steps == list(range(1, 13))
    assert val_steps == [4, 8, 12]
    first = logged[0][0][0]
    assert set(first) == {"train/loss", "lr", "grad_norm", "tokens_seen", "tokens_per_s", "step_time_s", "memory/rss_bytes"}
    assert first["tokens_seen"] == 4 * 32
    assert first["memory/rss_bytes"] > 10_000_000
    assert set(logged[-1][0][0]) == {"val/loss", "val/loss_code", "val/loss_prose"}
    assert recording_run.of("finish") == [((), {"status": "finished"})]


def test_lr_schedule_warmup_then_cosine():
    cfg = TrainConfig(learning_rate=1.0, min_lr=0.1, warmup_steps=10, max_steps=110)
    assert get_lr(cfg, 0) == pytest.approx(0.1)
    assert get_lr(cfg, 9) == pytest.approx(1.0)
    assert get_lr(cfg, 10) == pytest.approx(1.0)
    assert get_lr(cfg, 60) == pytest.approx(0.55)
    assert get_lr(cfg, 110) == pytest.approx(0.1)


def test_checkpoints_kept_last_and_best_others_reported_pruned(tiny_cfg, recording_run, tmp_path):
    result = train(tiny_cfg(), recording_run, log=quiet)
    events = [(k["step"], k.get("status", "available"), a[0]) for a, k in recording_run.of("checkpoint")]
    available = [e for e in events if e[1] == "available"]
    pruned = [e for e in events if e[1] == "pruned"]
    assert [e[0] for e in available] == [4, 8, 12]
    kept = {k["step"] for k in result["checkpoints"]}
    assert 12 in kept and 1 <= len(kept) <= 2  # last 1 + best 1 (may be the same)
    assert sorted(e[0] for e in pruned) == sorted({4, 8, 12} - kept)
    on_disk = sorted(p.name for p in (tmp_path / "out").glob("ckpt_*.pt"))
    assert on_disk == sorted(f"ckpt_{s:07d}.pt" for s in kept)
    for k in result["checkpoints"]:
        assert ckpt.file_sha256(Path(k["path"])) == k["sha256"]
        assert k["size"] == os.path.getsize(k["path"])


def test_injected_spike_raises_the_loss(tiny_cfg, recording_run):
    calm = train(tiny_cfg(max_steps=30, ckpt_interval=100, eval_interval=100, data_limit=40), None, log=quiet)
    spiked = train(
        tiny_cfg(max_steps=30, ckpt_interval=100, eval_interval=100, inject_spike_at=20, spike_factor=300.0),
        recording_run,
        log=quiet,
    )
    assert [spiked["losses"][s] for s in range(1, 21)] == [calm["losses"][s] for s in range(1, 21)]
    after = max(spiked["losses"][s] for s in range(21, 26))
    assert after > 1.5 * calm["losses"][20]
    notes = recording_run.of("note")
    assert len(notes) == 1 and notes[0][1]["step"] == 20
    lrs = {k["step"]: a[0]["lr"] for a, k in recording_run.of("log") if "lr" in a[0]}
    assert lrs[21] == pytest.approx(300 * get_lr(spiked_cfg := tiny_cfg(max_steps=30), 20))
    assert lrs[24] == pytest.approx(get_lr(spiked_cfg, 23))


@pytest.mark.slow
def test_crash_at_exits_uncleanly_and_resume_continues(tmp_path):
    env = {**os.environ, "RUNCAST_SERVER": "", "RUNCAST_TOKEN": ""}
    args = [sys.executable, "-m", "runcast.cli.main", "train", "--out-dir", str(tmp_path), "--n-layer", "1",
            "--n-embd", "32", "--n-head", "2", "--block-size", "32", "--batch-size", "4", "--data-limit", "40",
            "--max-steps", "8", "--ckpt-interval", "4", "--eval-interval", "4", "--eval-iters", "1"]
    crashed = subprocess.run(args + ["--crash-at", "6"], capture_output=True, text=True, env=env, timeout=120)
    assert crashed.returncode == 1, crashed.stderr
    assert "crashing on purpose" in crashed.stdout
    assert "training offline" in crashed.stdout
    assert sorted(p.name for p in tmp_path.glob("ckpt_*")) == ["ckpt_0000004.pt"]
    resumed = subprocess.run(args + ["--resume", str(tmp_path / "ckpt_0000004.pt")], capture_output=True, text=True,
                             env=env, timeout=120)
    assert resumed.returncode == 0, resumed.stderr
    assert "resumed from" in resumed.stdout and "step 8: val loss" in resumed.stdout


def test_bad_mix_is_a_clear_error(tiny_cfg):
    with pytest.raises(ValueError, match="start at step 0"):
        train(tiny_cfg(mix="5:code=1"), None, log=quiet)


def test_resume_takes_the_saved_config_but_not_fault_flags(tiny_cfg, tmp_path):
    from runcast.train.trainer import merge_resumed_config

    saved = tiny_cfg(data_limit=40, crash_at=6, inject_spike_at=3, mix="0:code=1", max_steps=12, project="demo")
    given = TrainConfig(resume="x.pt", out_dir=str(tmp_path / "b"), max_steps=20)
    merged = merge_resumed_config(given, asdict(saved))
    assert (merged.data_limit, merged.mix, merged.n_embd) == (40, "0:code=1", 32)  # the data and model come back
    assert merged.project == "demo"  # the same run: same project
    assert merged.max_steps == 20 and merged.out_dir == str(tmp_path / "b")  # a flag set on the command line wins
    assert merged.crash_at is None and merged.inject_spike_at is None  # faults are per invocation


def test_each_checkpoint_logs_samples_scores_and_a_weight_histogram(tiny_cfg, recording_run, tmp_path):
    train(tiny_cfg(), recording_run, log=quiet)
    samples = recording_run.of("log_samples")
    assert [k["step"] for _, k in samples] == [4, 8, 12]
    rows = samples[-1][0][0]
    assert [r["prompt"] for r in rows] == ["def ", "import ", "class ", "The "]
    assert all(len(r["output"]) <= 48 and "\x00" not in r["output"] for r in rows)  # bytes, invalid ones replaced
    assert [r["settings"]["seed"] for r in rows] == [1337, 1338, 1339, 1340]
    again = type(recording_run)()  # the same weights say the same: seeded per prompt
    train(tiny_cfg(out_dir=str(tmp_path / "again")), again, log=quiet)
    assert again.of("log_samples") == samples
    evals = recording_run.of("log_eval")
    assert [(k["step"], k["checkpoint"], k["suite"]) for _, k in evals] == [(s, s, "runcast-train") for s in (4, 8, 12)]
    scores = evals[-1][0][0]
    assert set(scores) == {"val_code", "val_prose"}
    assert scores["val_code"]["bits_per_byte"] == pytest.approx(scores["val_code"]["loss"] / 0.6931471805599453)
    media = recording_run.of("log_media")
    assert [(a[0], type(a[1]).__name__, k["step"]) for a, k in media] == [
        ("weights/tok_emb", "Histogram", s) for s in (4, 8, 12)]


def test_sample_tokens_0_logs_no_samples(tiny_cfg, recording_run):
    train(tiny_cfg(sample_tokens=0), recording_run, log=quiet)
    assert recording_run.of("log_samples") == [] and len(recording_run.of("log_eval")) == 3
