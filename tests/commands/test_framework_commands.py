"""The Hugging Face callback (``RuncastCallback(commands=True)``) and the Lightning callback
(``RuncastCommands``) on tiny real models on the CPU, driven by a team token through a real
embedded server: ``set lr_scale`` changes the learning rate at the acknowledged step, ``checkpoint``
saves one, ``stop`` ends training with a checkpoint at the last step, acknowledged at that step; a
Trainer that did not opt in refuses with "this run does not take commands"."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import httpx
import pytest
import runcast
import torch
from artifacts.live import LiveServer
from runcast.commands import NOT_TAKEN, Command
from runcast.integrations._commands import StepCommands
from runcast_server.core.auth import create_token

from commands.team import deliver, listed

pytestmark = pytest.mark.slow
API = "/api/v1"
LR = 1e-3


@pytest.fixture
def tokens(client: Any, db: Any) -> dict[str, str]:
    with db.scope() as session:
        return {"ingest": create_token(session, "pp", label="trainer", scopes=["ingest"]),
                "team": create_token(session, "pp", label="ops", scopes=["team"])}


def _acked(url: str, run: str, sent: dict[int, str]) -> dict[str, tuple[int, str]]:
    """kind -> (step, message) of each command sent, all of them applied."""
    commands = listed(url, run)
    entries = [commands[uid] for uid in sent.values()]
    assert [(e["state"], e["outcome"]) for e in entries] == [("acknowledged", "applied")] * len(sent), entries
    return {e["kind"]: (e["step"], e["message"]) for e in entries}


def _series(url: str, run: str, key: str) -> dict[int, float]:
    series = httpx.get(f"{url}{API}/runs/{run}/metrics", timeout=30, params={"key": key, "max_points": 20000}).json()["series"]
    return dict(zip(series[0]["step"], series[0]["last"], strict=True))


class Tokens(torch.utils.data.Dataset):  # type: ignore[type-arg]
    def __init__(self, n: int) -> None:
        self.ids = torch.randint(0, 64, (n, 16), generator=torch.Generator().manual_seed(0))

    def __len__(self) -> int:
        return len(self.ids)

    def __getitem__(self, i: int) -> dict[str, torch.Tensor]:
        return {"input_ids": self.ids[i], "labels": self.ids[i]}


def _hf(tmp_path: Path, callbacks: list[Any], max_steps: int = 30) -> Any:
    transformers = pytest.importorskip("transformers")
    pytest.importorskip("accelerate")
    model = transformers.GPT2LMHeadModel(
        transformers.GPT2Config(n_layer=1, n_head=2, n_embd=16, vocab_size=64, n_positions=16))
    args = transformers.TrainingArguments(
        output_dir=str(tmp_path / "hf"), max_steps=max_steps, per_device_train_batch_size=2, logging_steps=1,
        save_strategy="no", report_to=[], use_cpu=True, learning_rate=LR, lr_scheduler_type="constant", seed=7,
        disable_tqdm=True)
    return transformers.Trainer(model=model, args=args, train_dataset=Tokens(64), callbacks=callbacks)


def _open(url: str, token: str, spool: Path) -> Any:
    return runcast.init(project="pp", server=url, token=token, mode="online", heartbeat_interval=0.2,
                        spool_dir=str(spool / "spool"))


def test_hf_trainer_takes_set_checkpoint_and_stop_at_the_acknowledged_steps(
        client: Any, tokens: dict[str, str], tmp_path: Path) -> None:
    transformers = pytest.importorskip("transformers")
    from runcast.integrations.transformers import RuncastCallback

    plan = {3: {"kind": "set", "name": "lr_scale", "value": 0.5}, 5: {"kind": "checkpoint"}, 8: {"kind": "stop"}}
    sent: dict[int, str] = {}

    with LiveServer(client.app) as server:
        run = _open(server.url, tokens["ingest"], tmp_path)

        class Team(transformers.TrainerCallback):  # before Runcast's: its on_step_end takes what this sent
            def on_step_end(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
                if state.global_step in plan:
                    sent[state.global_step] = deliver(server.url, tokens["team"], run, plan[state.global_step])

        trainer = _hf(tmp_path, [Team(), RuncastCallback(commands=True)])
        trainer.train()  # returns: stop ends the loop
        run.flush()  # the acknowledgements, queued at the save
        # Each is taken at the boundary of the step it was sent at (the SDK held it before that boundary).
        acked = _acked(server.url, run.id, sent)
        last = trainer.state.global_step
        assert (acked["set"][0], acked["checkpoint"][0], acked["stop"][0], last) == (4, 5, 8, 8)
        assert f"checkpoint-{last}" in acked["stop"][1] and f"checkpoint-{acked['checkpoint'][0]}" in acked["checkpoint"][1]
        assert {p.name for p in (tmp_path / "hf").glob("checkpoint-*")} == {
            f"checkpoint-{acked['checkpoint'][0]}", f"checkpoint-{last}"}
        lr = _series(server.url, run.id, "lr")
        assert sorted(lr) == list(range(1, last + 1))
        assert all(lr[s] == pytest.approx(LR if s < acked["set"][0] else LR / 2) for s in lr), lr  # at the acked step
        assert trainer.optimizer.param_groups[0]["lr"] == pytest.approx(LR / 2)
        checkpoints = httpx.get(f"{server.url}{API}/runs/{run.id}/checkpoints", timeout=30).json()
        assert {c["step"] for c in checkpoints["checkpoints"]} == {acked["checkpoint"][0], last}

        # Resumed from the stop's checkpoint, the Trainer goes on at half the rate, and a set back to 1 restores it.
        plan.clear()
        plan[last + 1] = {"kind": "set", "name": "lr_scale", "value": 1.0}
        sent.clear()
        resumed = _hf(tmp_path, [Team(), RuncastCallback(commands=True)], max_steps=last + 6)
        resumed.train(resume_from_checkpoint=str(tmp_path / "hf" / f"checkpoint-{last}"))
        run.finish()
        back = _acked(server.url, run.id, sent)["set"][0]
        lr = _series(server.url, run.id, "lr")
        assert back == last + 2 and sorted(lr) == list(range(1, last + 7))
        assert all(lr[s] == pytest.approx(LR / 2 if s < back else LR) for s in range(last + 1, last + 7)), lr


def test_hf_trainer_that_did_not_opt_in_refuses(client: Any, tokens: dict[str, str], tmp_path: Path) -> None:
    transformers = pytest.importorskip("transformers")
    from runcast.integrations.transformers import RuncastCallback

    sent: list[str] = []
    with LiveServer(client.app) as server:
        run = _open(server.url, tokens["ingest"], tmp_path)

        class Team(transformers.TrainerCallback):
            def on_step_end(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
                if state.global_step == 2:
                    sent.append(deliver(server.url, tokens["team"], run, {"kind": "stop"}))

        trainer = _hf(tmp_path, [Team(), RuncastCallback()], max_steps=6)
        trainer.train()
        assert trainer.state.global_step == 6  # not stopped
        run.finish()
        entry = listed(server.url, run.id)[sent[0]]
        assert (entry["state"], entry["outcome"], entry["message"]) == ("acknowledged", "refused", NOT_TAKEN)


def test_lightning_takes_set_checkpoint_and_stop(client: Any, tokens: dict[str, str], tmp_path: Path) -> None:
    L = pytest.importorskip("lightning")
    from runcast.integrations.lightning import RuncastCommands, RuncastLogger

    plan = {3: {"kind": "set", "name": "lr_scale", "value": 0.25}, 5: {"kind": "checkpoint"}, 6: {"kind": "pause"},
            8: {"kind": "stop"}}
    sent: dict[int, str] = {}
    held: list[int] = []
    used: dict[int, float] = {}  # optimizer step -> the learning rate it ran with

    class Tiny(L.LightningModule):
        def __init__(self) -> None:
            super().__init__()
            self.net = torch.nn.Linear(4, 1)

        def training_step(self, batch: Any, _: int) -> torch.Tensor:
            used[self.trainer.global_step + 1] = self.trainer.optimizers[0].param_groups[0]["lr"]
            loss = torch.nn.functional.mse_loss(self.net(batch[0]), batch[1])
            self.log("train/loss", loss)
            return loss

        def configure_optimizers(self) -> Any:
            optimizer = torch.optim.SGD(self.parameters(), lr=LR)
            decay = torch.optim.lr_scheduler.LambdaLR(optimizer, lambda s: 1.0 / (1 + 0.01 * s))
            return {"optimizer": optimizer, "lr_scheduler": {"scheduler": decay, "interval": "step"}}

    class Team(L.Callback):  # before RuncastCommands: its on_train_batch_end takes what this sent
        def on_train_batch_end(self, trainer: Any, *args: Any) -> None:
            if trainer.global_step in plan:
                sent[trainer.global_step] = deliver(server.url, tokens["team"], run, plan[trainer.global_step])
            if trainer.global_step == 6:
                threading.Thread(target=resume_later, args=(trainer, sent[6]), daemon=True).start()

    def resume_later(trainer: Any, pause: str) -> None:
        """The team resumes a second after the pause was acknowledged, having seen the trainer hold."""
        deadline = time.monotonic() + 20
        while listed(server.url, run.id)[pause]["state"] != "acknowledged" and time.monotonic() < deadline:
            time.sleep(0.05)
        at = trainer.global_step
        time.sleep(1.0)
        held.extend([at, trainer.global_step])
        sent[-1] = deliver(server.url, tokens["team"], run, {"kind": "resume"})

    data = torch.utils.data.TensorDataset(torch.randn(128, 4), torch.randn(128, 1))

    def fit(max_steps: int, ckpt_path: str | None = None) -> Any:
        trainer = L.Trainer(max_steps=max_steps, logger=RuncastLogger(), callbacks=[Team(), RuncastCommands()],
                            enable_checkpointing=False, enable_progress_bar=False, enable_model_summary=False,
                            default_root_dir=str(tmp_path), accelerator="cpu", log_every_n_steps=1)
        trainer.fit(Tiny(), torch.utils.data.DataLoader(data, batch_size=2), ckpt_path=ckpt_path)
        return trainer

    def schedule(step: int) -> float:
        return LR / (1 + 0.01 * (step - 1))

    with LiveServer(client.app) as server:
        run = _open(server.url, tokens["ingest"], tmp_path)
        trainer = fit(40)
        run.flush()  # the acknowledgements, queued at the save
        acked = _acked(server.url, run.id, sent)
        last = trainer.global_step
        assert (acked["set"][0], acked["checkpoint"][0], acked["stop"][0], last) == (4, 5, 8, 8)
        assert held[0] == held[1] == acked["pause"][0] == acked["resume"][0]  # no step while paused
        names = {f"commanded-step={acked['checkpoint'][0]}.ckpt", f"commanded-step={last}.ckpt"}
        assert {p.name for p in (tmp_path / "checkpoints").iterdir()} == names
        assert f"commanded-step={last}.ckpt" in acked["stop"][1]
        scaled = acked["set"][0]
        assert sorted(used) == list(range(1, last + 1))
        for step, lr in used.items():  # the schedule, scaled by 0.25 from the acknowledged step on
            assert lr == pytest.approx(schedule(step) * (0.25 if step >= scaled else 1.0)), (step, used)
        checkpoints = httpx.get(f"{server.url}{API}/runs/{run.id}/checkpoints", timeout=30).json()
        assert {c["step"] for c in checkpoints["checkpoints"]} == {acked["checkpoint"][0], last}

        # Resumed from the stop's checkpoint: the scale in force goes on, and a set of 0.5 means 0.5 of the schedule.
        plan.clear()
        plan[last + 1] = {"kind": "set", "name": "lr_scale", "value": 0.5}
        sent.clear()
        used.clear()
        fit(last + 6, ckpt_path=str(tmp_path / "checkpoints" / f"commanded-step={last}.ckpt"))
        run.finish()
        half = _acked(server.url, run.id, sent)["set"][0]
        assert half == last + 2 and sorted(used) == list(range(last + 1, last + 7))
        for step, lr in used.items():
            assert lr == pytest.approx(schedule(step) * (0.25 if step < half else 0.5)), (step, used)


WORKER = Path(__file__).with_name("two_ranks.py")
TESTS = Path(__file__).resolve().parents[1]
STOP, HALVE = {"kind": "stop"}, {"kind": "set", "name": "lr_scale", "value": 0.5}


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


@pytest.mark.parametrize(("framework", "command"), [("hf", STOP), ("lightning", STOP), ("hf", HALVE)],
                         ids=["hf-stop", "lightning-stop", "hf-set"])
def test_two_ranks_act_at_the_same_step(framework: str, command: dict[str, Any], client: Any,
                                        tokens: dict[str, str], tmp_path: Path) -> None:
    """torchrun, 2 processes over gloo: rank 0 takes the command, both ranks act at the step it names."""
    pytest.importorskip("transformers" if framework == "hf" else "lightning")
    torchrun = Path(sys.executable).with_name("torchrun")
    with LiveServer(client.app) as server:
        env = {**os.environ, "RUNCAST_SERVER": server.url, "RUNCAST_TOKEN": tokens["ingest"],
               "TEAM_TOKEN": tokens["team"], "TEAM_COMMAND": json.dumps(command), "OMP_NUM_THREADS": "1",
               "RUNCAST_SPOOL_DIR": str(tmp_path / "spool"), "RUNCAST_SYSTEM_INTERVAL": "off",
               # the ranks import the tests' `commands.team`: pytest's `pythonpath` reaches only its own process
               "PYTHONPATH": os.pathsep.join(filter(None, [str(TESTS), os.environ.get("PYTHONPATH", "")]))}
        done = subprocess.run([str(torchrun), "--nproc_per_node", "2", "--master_addr", "127.0.0.1", "--master_port",
                               str(_free_port()), str(WORKER), framework, str(tmp_path)],
                              env=env, capture_output=True, text=True, timeout=600)
        assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-4000:]
        sent = json.loads((tmp_path / "sent.json").read_text())
        entry = listed(server.url, sent["run"])[sent["command"]]
    ranks = [json.loads((tmp_path / f"rank{r}.json").read_text()) for r in (0, 1)]
    assert (entry["state"], entry["outcome"]) == ("acknowledged", "applied"), entry
    if command is STOP:  # both ranks stopped at the step acknowledged, after the framework's save of it
        assert [r["step"] for r in ranks] == [entry["step"]] * 2 == [3] * 2
        saved = tmp_path / ("hf/checkpoint-3" if framework == "hf" else "checkpoints/commanded-step=3.ckpt")
        assert saved.exists() and str(saved.name) in entry["message"]
    else:  # both ranks ran to the end, at half the rate from the acknowledged step on
        assert entry["step"] == 4 and [r["step"] for r in ranks] == [40, 40]
        for r in ranks:
            lr = {int(s): v for s, v in r["lr"].items()}
            assert all(lr[s] == pytest.approx(1e-3 if s < 4 else 5e-4) for s in range(1, 41)), lr


class _Run:
    """The few verbs StepCommands uses, holding the commands a newer server might send."""

    def __init__(self) -> None:
        self.config: dict[str, Any] = {}
        self.waiting: list[Command] = []
        self.answers: list[tuple[str, int | None, str, str]] = []

    def tunable(self, name: str, default: float, **bounds: Any) -> Any:
        from runcast.commands import Tunable
        self.scale = Tunable(name, default)
        return self.scale

    def commands(self) -> list[Command]:
        taken, self.waiting = self.waiting, []
        return taken

    def checkpoint(self, path: str, step: int) -> None:
        self.answers.append(("reported", step, "checkpoint", path))

    def send(self, kind: str, **fields: Any) -> None:
        def answer(c: Command, step: int | None, outcome: str, message: str) -> None:
            if outcome == "applied" and c.kind == "set":
                self.scale.value = float(c.value)
            self.answers.append((c.kind, step, outcome, message))
        self.waiting.append(Command(id=kind, kind=kind, reason="", sender="ops", _answer=answer, **fields))


def test_unknown_kinds_are_refused_and_pause_holds_until_resume() -> None:
    from runcast.integrations._ranks import One, boundary

    run = _Run()
    slept: list[float] = []

    def sleep(seconds: float) -> None:  # while paused: the team resumes after two polls
        slept.append(seconds)
        if len(slept) == 2:
            run.send("checkpoint")
        if len(slept) == 3:
            run.send("resume")

    commands = StepCommands(run, sleep=sleep)
    run.send("rewind")
    run.send("set", name="dropout", value=0.1)
    run.send("pause")
    acted: list[Any] = []
    decision = boundary(One(), lambda: commands.decide(4), acted.append, commands.sleep, until_save=True)
    assert decision.save and decision.hold and not decision.stop  # held until the checkpoint asked for while paused
    commands.saved(4, "ckpt-4")
    decision = boundary(One(), lambda: commands.decide(4), acted.append, commands.sleep, until_save=True)
    assert not decision.save and not decision.hold and not commands.paused  # held again after saving, until resume
    assert [d.hold for d in acted] == [True] * 4 + [False] and len(slept) == 3
    assert [(k, s, o) for k, s, o, _ in run.answers] == [
        ("rewind", 4, "refused"), ("set", 4, "refused"), ("pause", 4, "applied"), ("checkpoint", 4, "applied"),
        ("resume", 4, "applied")]
    assert run.answers[0][3] == "this trainer takes no rewind"


def test_lightning_acts_once_per_optimizer_step_when_gradients_accumulate(tmp_path: Path) -> None:
    pytest.importorskip("lightning")
    from types import SimpleNamespace

    from runcast.integrations.lightning import RuncastCommands

    run, saved = _Run(), []
    trainer = SimpleNamespace(global_step=0, global_rank=0, world_size=1, loggers=[], optimizers=[],
                              lr_scheduler_configs=[], should_stop=False, checkpoint_callback=None,
                              default_root_dir=str(tmp_path), save_checkpoint=saved.append)
    callback = RuncastCommands(run=run)
    callback.on_train_start(trainer, None)
    trainer.global_step = 1
    callback.on_train_batch_end(trainer, None, None, None, 0)  # the batch that stepped the optimizer
    run.send("stop")
    callback.on_train_batch_end(trainer, None, None, None, 1)  # accumulating: not a step boundary
    assert run.waiting and not trainer.should_stop and not saved
    trainer.global_step = 2
    callback.on_train_batch_end(trainer, None, None, None, 2)
    path = str(tmp_path / "checkpoints" / "commanded-step=2.ckpt")
    assert trainer.should_stop and saved == [path]
    assert [a[:3] for a in run.answers] == [("reported", 2, "checkpoint"), ("stop", 2, "applied")]
