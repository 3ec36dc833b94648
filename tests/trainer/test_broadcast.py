"""`runcast train` against a real embedded server: crash, resume in a new segment, events on the timeline."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import httpx
import pytest

pytestmark = pytest.mark.slow


@pytest.fixture
def server(processes, tmp_path):
    """An embedded `runcast serve` and an ingest token for project "tiny": (url, token, env)."""
    env = {"RUNCAST_DATA_DIR": str(tmp_path / "server-data")}
    token = processes.cli("token", "create", "--project", "tiny", **env).stdout.strip().splitlines()[-1]
    processes.start_api(**env)
    return processes.api_url, token


def train_cli(tmp_path: Path, *extra: str, check_rc: int = 0) -> str:
    args = [sys.executable, "-m", "runcast.cli.main", "train", "--out-dir", str(tmp_path / "out"),
            "--n-layer", "1", "--n-embd", "32", "--n-head", "2", "--block-size", "32", "--batch-size", "4",
            "--data-limit", "40", "--max-steps", "8", "--ckpt-interval", "4", "--eval-interval", "4",
            "--eval-iters", "1", "--keep-last", "1", "--keep-best", "0", "--project", "tiny", "--name", "crash-demo",
            "--mix", "0:code=0.7,prose=0.3;2:code=0.5,prose=0.5", *extra]
    env = {**os.environ, "RUNCAST_SPOOL_DIR": str(tmp_path / "spool")}
    res = subprocess.run(args, capture_output=True, text=True, env=env, timeout=180)
    assert res.returncode == check_rc, res.stdout + res.stderr
    return res.stdout


def test_crash_and_resume_broadcast_as_two_segments(server, tmp_path):
    url, token = server
    out = train_cli(tmp_path, "--server", url, "--token", token, "--crash-at", "6", "--inject-spike-at", "5",
                    check_rc=1)
    run_id = re.search(r"as run (\S+)", out).group(1)
    out2 = train_cli(tmp_path, "--server", url, "--token", token, "--resume", str(tmp_path / "out" / "ckpt_0000004.pt"))
    assert f"as run {run_id} (resumed at step 4)" in out2

    api = httpx.Client(base_url=f"{url}/api/v1", timeout=10)
    run = api.get(f"/runs/{run_id}").json()
    assert run["status"] == "finished" and run["seed"] == 1337 and run["config"]["n_embd"] == 32
    assert [(s["index"], s["start_step"], s["resumed"]) for s in run["segments"]] == [(0, 0, False), (1, 4, True)]
    assert {"train/loss", "lr", "grad_norm", "tokens_seen", "val/loss"} <= set(run["keys"])

    loss = api.get(f"/runs/{run_id}/metrics", params={"key": "train/loss"}).json()["series"]
    assert [s["step"] for s in loss] == [[1, 2, 3, 4, 5, 6], [5, 6, 7, 8]]

    events = api.get(f"/runs/{run_id}/events", params={"limit": 200}).json()["events"]
    kinds = [(e["type"], e["segment"], e["step"]) for e in events]
    assert [k for k in kinds if k[0] == "manifest"] == [("manifest", 0, 0)]  # data unchanged: not resent
    assert [k for k in kinds if k[0] == "data_mix"] == [("data_mix", 0, 0), ("data_mix", 0, 2), ("data_mix", 1, 4)]
    assert [k for k in kinds if k[0] == "note"] == [("note", 0, 5)]
    ckpts = [(e["segment"], e["step"], e["payload"]["status"]) for e in events if e["type"] == "checkpoint"]
    assert ckpts == [(0, 4, "available"), (1, 8, "available"), (1, 4, "pruned")]
    available = [e["payload"] for e in events if e["type"] == "checkpoint" and e["payload"]["status"] == "available"]
    assert all(len(p["sha256"]) == 64 and p["size"] > 0 and "val/loss" in p["metrics"] for p in available)
    manifest = next(e["payload"]["manifest"] for e in events if e["type"] == "manifest")
    assert set(manifest["sources"]) == {"code", "prose"} and manifest["dedup"]["removed"] >= 0

    # What the model said and scored at each checkpoint (runcast/train/showcase.py), across the crash
    # and the resume: the checkpoint of step 4 in the first segment, that of step 8 in the second.
    prompts = api.get(f"/runs/{run_id}/samples/prompts").json()["prompts"]
    assert [(p["prompt"], p["count"], p["first_step"], p["last_step"]) for p in prompts] == [
        ("def ", 2, 4, 8), ("import ", 2, 4, 8), ("class ", 2, 4, 8), ("The ", 2, 4, 8)]
    samples = api.get(f"/runs/{run_id}/samples", params={"prompt": prompts[0]["prompt_id"], "key": "samples"}).json()
    assert [(s["segment"], s["step"], s["settings"]["seed"]) for s in samples["samples"]] == [(0, 4, 1337), (1, 8, 1337)]
    evals = api.get(f"/runs/{run_id}/evals").json()["evals"]
    assert [(e["segment"], e["step"], e["checkpoint"], e["suite"], e["task"], sorted(e["metrics"])) for e in evals] == [
        (seg, step, step, "runcast-train", task, ["bits_per_byte", "loss"])
        for seg, step in ((0, 4), (1, 8)) for task in ("val_code", "val_prose")]
    listed = {c["step"]: c for c in api.get(f"/runs/{run_id}/checkpoints").json()["checkpoints"]}
    assert {e["task"] for e in listed[8]["evals"]} == {"val_code", "val_prose"}
    keys = api.get(f"/runs/{run_id}/media/keys").json()["keys"]
    assert [(k["key"], k["kind"], k["count"], k["first_step"], k["last_step"]) for k in keys] == [
        ("weights/tok_emb", "histogram", 2, 4, 8)]
