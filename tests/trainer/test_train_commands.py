"""The reference trainer (`runcast train`, a real process on the CPU) taking the team's commands from
the CLI (`runcast runs set|stop|pause|resume`) through a real `runcast serve`: the learning rate changes
at exactly the acknowledged step, stop exits 0 with a checkpoint at the last step, pause holds the loop
(no step logged, the run still running) until resume, which goes on at the next step; each decision is
listed with the trainer's answer. Two ranks (torchrun, DeepSpeed over gloo) act at the same step."""

from __future__ import annotations

import importlib.util
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

pytestmark = pytest.mark.slow
LR = 1e-3  # learning_rate == min_lr, no warmup: a flat schedule, so a scaled step stands out
CONFIGS = Path(__file__).resolve().parents[2] / "examples" / "ds_configs"


def _wait(what: str, done: Callable[[], Any], timeout: float = 90.0) -> Any:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if value := done():
            return value
        time.sleep(0.2)
    raise AssertionError(f"timed out waiting for {what}")


def _trainer(url: str, token: str, out: Path, ranks: int = 1) -> subprocess.Popen[str]:
    args = ["-m", "runcast.cli.main", "train", "--out-dir", str(out), "--n-layer", "1",
            "--n-embd", "16", "--n-head", "2", "--block-size", "16", "--batch-size", "2", "--data-limit", "20",
            "--max-steps", "100000", "--warmup-steps", "0", "--learning-rate", str(LR), "--min-lr", str(LR),
            "--eval-interval", "100000", "--eval-iters", "1", "--ckpt-interval", "100000", "--sample-tokens", "0",
            "--project", "tiny", "--name", "steered", "--server", url, "--token", token]
    launch = [sys.executable]
    if ranks > 1:  # DeepSpeed makes the process group the ranks agree through
        launch = [str(Path(sys.executable).with_name("torchrun")), "--nproc_per_node", str(ranks),
                  "--master_addr", "127.0.0.1", "--master_port", str(_free_port())]
        args += ["--deepspeed", str(CONFIGS / "zero1_fp32.json")]
    env = {**os.environ, "RUNCAST_SPOOL_DIR": str(out.parent / "spool"), "RUNCAST_SYSTEM_INTERVAL": "off",
           "OMP_NUM_THREADS": "1", "TORCH_EXTENSIONS_DIR": os.environ.get(
               "TORCH_EXTENSIONS_DIR", str(Path.home() / ".cache" / "runcast-torch-extensions"))}
    return subprocess.Popen([*launch, *args], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env,
                            start_new_session=True)  # its own process group: a failed test kills every rank


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


class Steered:
    """A `runcast serve` with an ingest and a team token, a `runcast train` on it, and the CLI as the team."""

    def __init__(self, processes: Any, tmp_path: Path, ranks: int = 1) -> None:
        self.processes, self.env = processes, {"RUNCAST_DATA_DIR": str(tmp_path / "server-data")}
        ingest = processes.cli("token", "create", "--project", "tiny", "--scope", "ingest", **self.env)
        self.team = processes.cli("token", "create", "--project", "tiny", "--scope", "team", "--label", "ops",
                                  **self.env).stdout.split()[-1]
        processes.start_api(**self.env)
        self.url = processes.api_url
        self.api = httpx.Client(base_url=f"{self.url}/api/v1", timeout=60)
        self.proc = _trainer(self.url, ingest.stdout.split()[-1], tmp_path / "out", ranks)
        self.lines: list[str] = []
        self.reader = threading.Thread(target=lambda: self.lines.extend(iter(self.proc.stdout.readline, "")),  # type: ignore[union-attr]
                                       daemon=True)
        self.reader.start()
        self.run = _wait("the run", lambda: next((ln.split(" as run ")[1].split()[0] for ln in list(self.lines)
                                                  if " as run " in ln), None), timeout=300)

    def runcast(self, *args: str) -> subprocess.CompletedProcess[str]:
        return self.processes.cli("runs", *args, "--server", self.url, "--token", self.team, **self.env)

    def send(self, *args: str) -> str:
        """`runcast runs VERB RUN ARGS` as the team: the command's id."""
        return self.runcast(args[0], self.run, *args[1:]).stdout.split()[1]

    def last_step(self) -> int:
        """The run's last step on the server (0 before the run's first event is stored)."""
        res = self.api.get(f"/runs/{self.run}")
        return int(res.json().get("last_step") or 0) if res.status_code == 200 else 0

    def acked(self, command: str) -> Any:
        listed = {c["command"]: c for c in self.api.get(f"/runs/{self.run}/commands").json()["commands"]}
        return listed[command] if listed[command]["state"] == "acknowledged" else None

    def lr(self) -> dict[int, float]:
        series = self.api.get(f"/runs/{self.run}/metrics", params={"key": "lr", "max_points": 20000}).json()["series"]
        assert set(series[0]["count"]) == {1}  # one point a bucket: the raw values
        return dict(zip(series[0]["step"], series[0]["last"], strict=True))

    def exited(self) -> int:
        code = self.proc.wait(timeout=300)
        self.reader.join(timeout=10)
        return code

    def close(self) -> None:
        """Kill what is left of the trainer (a failed test's): every rank, torchrun's children included."""
        if self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait(timeout=30)


@pytest.fixture
def steered(processes: Any, tmp_path: Path) -> Iterator[Callable[..., Steered]]:
    """``steered(ranks=1)``: a ``Steered`` trainer, killed at the end of the test if it still runs."""
    made: list[Steered] = []

    def make(ranks: int = 1) -> Steered:
        made.append(Steered(processes, tmp_path, ranks))
        return made[-1]

    yield make
    for trainer in made:
        trainer.close()


def test_set_changes_the_lr_at_the_acked_step_and_stop_exits_0_with_a_checkpoint(
        processes: Any, steered: Callable[..., Steered], tmp_path: Path) -> None:
    trainer = steered()
    _wait("step 5", lambda: trainer.last_step() >= 5)
    sent = trainer.send("set", "lr_scale", "0.5", "--reason", "halve the lr")
    set_ack = _wait("the set acknowledged", lambda: trainer.acked(sent))
    stop = trainer.send("stop", "--reason", "enough for today")
    assert trainer.exited() == 0, "".join(trainer.lines)
    stop_ack, run, api = trainer.acked(stop), trainer.run, trainer.api
    detail = api.get(f"/runs/{run}").json()
    last = detail["last_step"]
    assert detail["status"] == "finished"
    assert (set_ack["outcome"], stop_ack["outcome"], stop_ack["step"]) == ("applied", "applied", last)

    lr = trainer.lr()
    assert sorted(lr) == list(range(1, last + 1))
    halved = [s for s in sorted(lr) if lr[s] == pytest.approx(LR / 2)]
    assert halved and halved[0] == set_ack["step"] and halved == list(range(set_ack["step"], last + 1))
    assert all(lr[s] == pytest.approx(LR) for s in range(1, set_ack["step"]))

    # The checkpoint of the last step: on disk, and on the run's record.
    assert (tmp_path / "out" / f"ckpt_{last:07d}.pt").exists()
    events = api.get(f"/runs/{run}/events", params={"limit": 500}).json()["events"]
    assert [(e["step"], e["payload"]["status"]) for e in events if e["type"] == "checkpoint"] == [(last, "available")]
    # The decisions, with the trainer's answers, in `runcast runs commands` (as the public reads it).
    table = processes.cli("runs", "commands", run, "--server", trainer.url, **trainer.env).stdout
    assert f"applied at step {set_ack['step']}: learning rate x0.5 from step {set_ack['step']}" in table
    assert f"applied at step {last}: checkpoint saved at step {last} (ckpt_{last:07d}.pt)" in table and "training stops" in table
    assert str(tmp_path) not in table and "out/" not in table  # no path on the public record (the run did not opt in)
    assert sum(ln.startswith("ops ") for ln in table.splitlines()) == 2  # the sender (WHO), for both commands
    assert "enough for today" in table


def test_pause_holds_every_step_until_resume_which_goes_on_at_the_next_step(steered: Callable[..., Steered]) -> None:
    trainer = steered()
    _wait("step 5", lambda: trainer.last_step() >= 5)
    pause = trainer.send("pause", "--reason", "look at the spike")
    paused_at = _wait("the pause acknowledged", lambda: trainer.acked(pause))["step"]
    time.sleep(3)  # an observation window: no step may arrive in it (a held loop logs none, whatever the time)
    assert trainer.last_step() == paused_at and trainer.api.get(f"/runs/{trainer.run}").json()["status"] == "running"
    resume = trainer.send("resume", "--reason", "a data glitch, go on")
    resumed = _wait("the resume acknowledged", lambda: trainer.acked(resume))
    _wait("five more steps", lambda: trainer.last_step() >= paused_at + 5)
    trainer.send("stop", "--reason", "done")
    assert trainer.exited() == 0, "".join(trainer.lines)
    last = trainer.last_step()
    assert sorted(trainer.lr()) == list(range(1, last + 1))  # no step missing or doubled around the pause
    assert resumed["step"] == paused_at
    table = trainer.runcast("commands", trainer.run).stdout
    assert f"applied at step {paused_at}: paused at step {paused_at}" in table and "look at the spike" in table
    assert f"applied at step {paused_at}: resumed at step {paused_at}" in table and "go on" in table


@pytest.mark.skipif(importlib.util.find_spec("deepspeed") is None, reason="needs deepspeed")
def test_two_ranks_take_set_and_stop_at_the_same_step(steered: Callable[..., Steered], tmp_path: Path) -> None:
    trainer = steered(ranks=2)
    _wait("step 3", lambda: trainer.last_step() >= 3, timeout=300)
    sent = trainer.send("set", "lr_scale", "0.5", "--reason", "halve it on both ranks")
    set_ack = _wait("the set acknowledged", lambda: trainer.acked(sent))
    stop = trainer.send("stop", "--reason", "both ranks")
    assert trainer.exited() == 0, "".join(trainer.lines)  # torchrun: both ranks exited 0
    last, stop_ack = trainer.last_step(), trainer.acked(stop)
    assert (stop_ack["outcome"], stop_ack["step"]) == ("applied", last)
    lr = trainer.lr()
    assert sorted(lr) == list(range(1, last + 1))
    assert all(lr[s] == pytest.approx(LR if s < set_ack["step"] else LR / 2) for s in lr), lr
    # Each rank wrote its part of the checkpoint of the acknowledged step, and said it stopped there.
    shards = {p.name for p in (tmp_path / "out" / f"ckpt_{last:07d}").iterdir()}
    assert {"zero_pp_rank_0_mp_rank_00_optim_states.pt", "zero_pp_rank_1_mp_rank_00_optim_states.pt"} <= shards
    assert sum(f"step {last}: stopped by the team (exit 0)" in ln for ln in trainer.lines) == 2
