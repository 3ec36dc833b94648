"""The reference trainer (`runcast train`, a real process on the CPU) taking the team's commands from
the CLI (`runcast runs set|stop`) through a real `runcast serve`: the learning rate changes at exactly
the acknowledged step, stop exits 0 with a checkpoint at the last step, each decision is listed with
the trainer's answer; pause holds the loop until resume."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
import pytest

pytestmark = pytest.mark.slow
LR = 1e-3  # learning_rate == min_lr, no warmup: a flat schedule, so a scaled step stands out


def _wait(what: str, done: Callable[[], Any], timeout: float = 90.0) -> Any:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if value := done():
            return value
        time.sleep(0.2)
    raise AssertionError(f"timed out waiting for {what}")


def _trainer(url: str, token: str, out: Path) -> subprocess.Popen[str]:
    args = [sys.executable, "-m", "runcast.cli.main", "train", "--out-dir", str(out), "--n-layer", "1",
            "--n-embd", "16", "--n-head", "2", "--block-size", "16", "--batch-size", "2", "--data-limit", "20",
            "--max-steps", "100000", "--warmup-steps", "0", "--learning-rate", str(LR), "--min-lr", str(LR),
            "--eval-interval", "100000", "--eval-iters", "1", "--ckpt-interval", "100000", "--sample-tokens", "0",
            "--project", "tiny", "--name", "steered", "--server", url, "--token", token]
    env = {**os.environ, "RUNCAST_SPOOL_DIR": str(out.parent / "spool"), "RUNCAST_SYSTEM_INTERVAL": "off"}
    return subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env)


def test_set_changes_the_lr_at_the_acked_step_and_stop_exits_0_with_a_checkpoint(processes: Any,
                                                                                 tmp_path: Path) -> None:
    env = {"RUNCAST_DATA_DIR": str(tmp_path / "server-data")}
    ingest = processes.cli("token", "create", "--project", "tiny", "--scope", "ingest", **env).stdout.split()[-1]
    team = processes.cli("token", "create", "--project", "tiny", "--scope", "team", "--label", "ops",
                         **env).stdout.split()[-1]
    processes.start_api(**env)
    url = processes.api_url
    api = httpx.Client(base_url=f"{url}/api/v1", timeout=10)
    proc = _trainer(url, ingest, tmp_path / "out")
    lines: list[str] = []
    reader = threading.Thread(target=lambda: lines.extend(iter(proc.stdout.readline, "")), daemon=True)  # type: ignore[union-attr]
    reader.start()
    try:
        run = _wait("the run", lambda: next((ln.split(" as run ")[1].split()[0] for ln in list(lines)
                                             if " as run " in ln), None))
        _wait("step 5", lambda: (api.get(f"/runs/{run}").json()["last_step"] or 0) >= 5)

        def runcast(*args: str) -> subprocess.CompletedProcess[str]:
            return processes.cli("runs", *args, "--server", url, "--token", team, **env)

        sent = runcast("set", run, "lr_scale", "0.5", "--reason", "halve the lr").stdout.split()[1]

        def acked(command: str) -> Any:
            listed = {c["command"]: c for c in api.get(f"/runs/{run}/commands").json()["commands"]}
            return listed[command] if listed[command]["state"] == "acknowledged" else None

        set_ack = _wait("the set acknowledged", lambda: acked(sent))
        stop = runcast("stop", run, "--reason", "enough for today").stdout.split()[1]
        assert proc.wait(timeout=120) == 0, "".join(lines)
    finally:
        if proc.poll() is None:
            proc.kill()
    reader.join(timeout=10)
    stop_ack = acked(stop)
    detail = api.get(f"/runs/{run}").json()
    last = detail["last_step"]
    assert detail["status"] == "finished"
    assert (set_ack["outcome"], stop_ack["outcome"], stop_ack["step"]) == ("applied", "applied", last)

    series = api.get(f"/runs/{run}/metrics", params={"key": "lr", "max_points": 20000}).json()["series"]
    assert set(series[0]["count"]) == {1}  # one point a bucket: the raw values
    lr = dict(zip(series[0]["step"], series[0]["last"], strict=True))
    assert sorted(lr) == list(range(1, last + 1))
    halved = [s for s in sorted(lr) if lr[s] == pytest.approx(LR / 2)]
    assert halved and halved[0] == set_ack["step"] and halved == list(range(set_ack["step"], last + 1))
    assert all(lr[s] == pytest.approx(LR) for s in range(1, set_ack["step"]))

    # The checkpoint of the last step: on disk, and on the run's record.
    assert (tmp_path / "out" / f"ckpt_{last:07d}.pt").exists()
    events = api.get(f"/runs/{run}/events", params={"limit": 500}).json()["events"]
    assert [(e["step"], e["payload"]["status"]) for e in events if e["type"] == "checkpoint"] == [(last, "available")]
    # The decisions, with the trainer's answers, in `runs commands` (as the public reads it).
    table = processes.cli("runs", "commands", run, "--server", url, **env).stdout
    assert f"applied at step {set_ack['step']}: learning rate x0.5 from step {set_ack['step']}" in table
    assert f"applied at step {last}: checkpoint saved at step {last}; stopping (exit 0)" in table
    assert table.count("ops") == 2 and "enough for today" in table
