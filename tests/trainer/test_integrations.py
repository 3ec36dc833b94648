"""HF Transformers callback and Lightning logger, each on a tiny real model against a real receiver."""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import ClassVar

import pytest
import torch

pytestmark = pytest.mark.slow


def _summary(receiver):
    events = receiver.events()
    started = [e for e in events if e["type"] == "run_started"]
    metrics: dict[str, dict[int, float]] = {}
    for e in events:
        if e["type"] == "metrics":
            for k, v in e["values"].items():
                metrics.setdefault(k, {})[e["step"]] = v
    ckpts = [(e["step"], e["status"], e["path"].rsplit("/", 1)[-1]) for e in events if e["type"] == "checkpoint"]
    finished = [e["status"] for e in events if e["type"] == "finished"]
    return started, metrics, ckpts, finished


class TokenData(torch.utils.data.Dataset):
    def __init__(self, n: int, seed: int) -> None:
        g = torch.Generator().manual_seed(seed)
        self.ids = torch.randint(0, 64, (n, 16), generator=g)

    def __len__(self) -> int:
        return len(self.ids)

    def __getitem__(self, i):
        return {"input_ids": self.ids[i], "labels": self.ids[i]}


def test_transformers_callback_logs_evals_checkpoints_and_resumes(receiver, tmp_path):
    transformers = pytest.importorskip("transformers")
    pytest.importorskip("accelerate")
    from runcast.integrations.transformers import RuncastCallback, map_key, summary_key

    def trainer(max_steps: int):
        model = transformers.GPT2LMHeadModel(
            transformers.GPT2Config(n_layer=1, n_head=2, n_embd=32, vocab_size=64, n_positions=16)
        )
        args = transformers.TrainingArguments(
            output_dir=str(tmp_path / "hf"), max_steps=max_steps, per_device_train_batch_size=4, logging_steps=1,
            eval_strategy="steps", eval_steps=3, save_steps=3, save_total_limit=1, report_to=[], use_cpu=True,
            learning_rate=1e-3, seed=7, disable_tqdm=True,
        )
        callback = RuncastCallback(project="hf", name="gpt2-tiny", server=receiver.url, token="t",
                                   spool_dir=str(tmp_path / "spool"))
        return transformers.Trainer(model=model, args=args, train_dataset=TokenData(64, 0),
                                    eval_dataset=TokenData(8, 1), callbacks=[callback]), callback

    first, callback = trainer(6)
    first.train()
    callback.run.flush()
    assert _summary(receiver)[3] == []  # open after train(): an evaluate() would still be recorded
    callback.finish()
    started, metrics, ckpts, finished = _summary(receiver)
    assert len(started) == 1 and started[0]["config"]["model"]["n_embd"] == 32 and started[0]["seed"] == 7
    assert sorted(metrics["train/loss"]) == [1, 2, 3, 4, 5, 6]
    assert sorted(metrics["eval/loss"]) == [3, 6]
    assert set(metrics["lr"]) == set(metrics["grad_norm"]) == {1, 2, 3, 4, 5, 6}
    assert metrics["lr"][1] > 0 and metrics["grad_norm"][1] > 0
    assert ckpts == [(3, "available", "checkpoint-3"), (6, "available", "checkpoint-6"), (3, "pruned", "checkpoint-3")]
    assert finished == ["finished"]

    # resume from the last checkpoint: the same run, a new segment at step 6
    second, callback = trainer(9)
    second.train(resume_from_checkpoint=str(tmp_path / "hf" / "checkpoint-6"))
    callback.finish()
    started, metrics, ckpts, finished = _summary(receiver)
    assert len(started) == 2 and started[1]["run"] == started[0]["run"] and started[1]["resume_step"] == 6
    assert sorted(metrics["train/loss"]) == [1, 2, 3, 4, 5, 6, 7, 8, 9]
    assert finished == ["finished", "finished"]
    assert map_key("eval_runtime") == "eval/runtime" and summary_key("train_loss") == "train/mean_loss"


def test_transformers_callback_leaves_a_passed_run_open(receiver, tmp_path):
    pytest.importorskip("transformers")
    import runcast
    from runcast.integrations.transformers import RuncastCallback

    run = runcast.init(project="hf", name="mine", server=receiver.url, token="t", spool_dir=str(tmp_path))

    class State:
        is_world_process_zero, global_step, best_metric = True, 5, None

    cb = RuncastCallback(run=run)
    cb.on_train_begin(None, State(), None)
    cb.on_log(None, State(), None, logs={"loss": torch.tensor(2.5), "learning_rate": 1e-3, "hist": [1, 2]})
    cb.on_train_end(None, State(), None)
    run.flush()
    assert [e["values"] for e in receiver.of_type("metrics")] == [{"train/loss": 2.5, "lr": 1e-3}]
    assert receiver.of_type("finished") == []
    run.finish()

    class OtherRank(State):
        is_world_process_zero = False

    quiet = RuncastCallback(project="hf", server=receiver.url, token="t", spool_dir=str(tmp_path))
    quiet.on_train_begin(None, OtherRank(), None)
    assert quiet.run is None


def test_lightning_logger_logs_metrics_and_checkpoints(receiver, tmp_path):
    L = pytest.importorskip("lightning")
    from runcast.integrations.lightning import RuncastLogger

    class Tiny(L.LightningModule):
        def __init__(self, width: int = 8) -> None:
            super().__init__()
            self.save_hyperparameters()
            self.net = torch.nn.Linear(width, 1)

        def training_step(self, batch, _):
            x, y = batch
            loss = torch.nn.functional.mse_loss(self.net(x), y)
            self.log("train/loss", loss)
            return loss

        def configure_optimizers(self):
            return torch.optim.SGD(self.parameters(), lr=0.1)

    g = torch.Generator().manual_seed(0)
    x = torch.randn(48, 8, generator=g)
    data = torch.utils.data.DataLoader(torch.utils.data.TensorDataset(x, x.sum(1, keepdim=True)), batch_size=8)
    logger = RuncastLogger(project="lightning", name="tiny", server=receiver.url, token="t",
                           spool_dir=str(tmp_path / "spool"))
    checkpoints = L.pytorch.callbacks.ModelCheckpoint(dirpath=tmp_path / "ckpt", every_n_train_steps=2, save_top_k=1,
                                                      monitor="train/loss")
    trainer = L.Trainer(max_steps=6, logger=logger, callbacks=[checkpoints], log_every_n_steps=1, accelerator="cpu",
                        enable_progress_bar=False, enable_model_summary=False)
    trainer.fit(Tiny(), data)
    logger.finish()

    started, metrics, ckpts, finished = _summary(receiver)
    assert len(started) == 1 and started[0]["config"] == {"width": 8, "model": {"num_parameters": 9}}
    assert sorted(metrics["train/loss"]) == [0, 1, 2, 3, 4, 5]
    available = [c for c in ckpts if c[1] == "available"]
    steps = [c[0] for c in available]  # save_top_k=1 writes a checkpoint only when train/loss improved
    assert steps[0] == 2 and set(steps) <= {2, 4, 6} and steps == sorted(steps)
    kept = [p.name for p in (tmp_path / "ckpt").iterdir()]
    assert len(kept) == 1 and sorted(c[2] for c in ckpts if c[1] == "pruned") == sorted(
        c[2] for c in available if c[2] not in kept)
    assert finished == ["finished"]


def _summary_values(receiver) -> dict[str, float]:
    """The end-of-run figures the integration put in the run's summary."""
    out: dict[str, float] = {}
    for e in receiver.events():
        if e["type"] == "update" and e.get("summary"):
            out.update(e["summary"])
    return out


def test_transformers_names_axes_summary_parameters_and_evaluate_after_training(receiver, tmp_path):
    transformers = pytest.importorskip("transformers")
    pytest.importorskip("accelerate")
    from runcast.integrations.transformers import RuncastCallback

    model = transformers.GPT2LMHeadModel(
        transformers.GPT2Config(n_layer=1, n_head=2, n_embd=32, vocab_size=64, n_positions=16)
    )
    args = transformers.TrainingArguments(
        output_dir=str(tmp_path / "hf"), max_steps=4, per_device_train_batch_size=4, logging_steps=1,
        eval_strategy="no", save_strategy="no", report_to=[], use_cpu=True, learning_rate=1e-3, seed=7,
        disable_tqdm=True, include_num_input_tokens_seen=True, label_names=["labels"], hub_token="secret-hub-token",
    )
    callback = RuncastCallback(project="hf", name="axes", server=receiver.url, token="t",
                               spool_dir=str(tmp_path / "spool"))
    trainer = transformers.Trainer(model=model, args=args, train_dataset=TokenData(64, 0),
                                   eval_dataset=TokenData(8, 1), callbacks=[callback])
    trainer.train()
    trainer.evaluate()  # after training: recorded, at the last step
    callback.finish()

    started, metrics, _, finished = _summary(receiver)
    assert started[0]["config"]["model"]["num_parameters"] == sum(p.numel() for p in model.parameters())
    # TrainingArguments as JSON types, as W&B's integration stores them: None as null, lists as lists
    training_args = started[0]["config"]["training_args"]
    assert training_args["label_names"] == ["labels"] and training_args["report_to"] == []
    assert training_args["resume_from_checkpoint"] is None and training_args["max_steps"] == 4
    assert "None" not in training_args.values() and "secret-hub-token" not in str(training_args)
    assert metrics["tokens_seen"] == {1: 64.0, 2: 128.0, 3: 192.0, 4: 256.0}  # 4 sequences of 16 tokens a step
    assert set(metrics["tokens_per_s"]) == set(metrics["time/elapsed"]) == {1, 2, 3, 4}
    elapsed = metrics["time/elapsed"]
    for step in (2, 3, 4):  # the rate over each logging interval, not the Trainer's running average
        rate = 64.0 / (elapsed[step] - elapsed[step - 1])
        assert metrics["tokens_per_s"][step] == pytest.approx(rate, rel=1e-6)
    assert set(metrics["eval/loss"]) == {4}
    # end-of-training figures are summary values, not one-point series
    figures = _summary_values(receiver)
    assert {"train/runtime", "train/total_flos", "train/mean_loss", "train/samples_per_second"} <= set(figures)
    assert figures["train/total_flos"] > 0
    assert not {"train/runtime", "train/total_flos", "train/mean_loss", "train/train_runtime"} & set(metrics)
    assert "train/num_input_tokens_seen" not in metrics and "train/train_tokens_per_second" not in metrics
    assert finished == ["finished"]


class _Tiny:
    """A LightningModule made per test (lightning is imported lazily)."""

    @staticmethod
    def make(L):
        class Tiny(L.LightningModule):
            def __init__(self, width: int = 8, optim: dict | None = None, layers: tuple = (8, 4)) -> None:
                super().__init__()
                self.save_hyperparameters()
                self.net = torch.nn.Linear(width, 1)

            def training_step(self, batch, _):
                x, y = batch
                loss = torch.nn.functional.mse_loss(self.net(x), y)
                self.log("train/loss", loss)
                return loss

            def validation_step(self, batch, _):
                x, y = batch
                self.log("val/loss", torch.nn.functional.mse_loss(self.net(x), y))

            def test_step(self, batch, _):
                x, y = batch
                self.log("test/loss", torch.nn.functional.mse_loss(self.net(x), y))

            def configure_optimizers(self):
                return torch.optim.SGD(self.parameters(), lr=0.1)

        return Tiny


def test_lightning_structured_hparams_validate_and_test_after_fit_and_last_ckpt_hashes(receiver, tmp_path):
    L = pytest.importorskip("lightning")
    from runcast.integrations.lightning import RuncastLogger

    g = torch.Generator().manual_seed(0)
    x = torch.randn(48, 8, generator=g)
    data = torch.utils.data.DataLoader(torch.utils.data.TensorDataset(x, x.sum(1, keepdim=True)), batch_size=8)

    class Recorded(L.pytorch.callbacks.ModelCheckpoint):
        """Keeps the sha256 of last.ckpt right after each save, before any later save replaces it."""

        seen: ClassVar[list[tuple[int, str]]] = []

        def _save_last_checkpoint(self, trainer, monitor_candidates):
            super()._save_last_checkpoint(trainer, monitor_candidates)
            if self.last_model_path:
                digest = hashlib.sha256(Path(self.last_model_path).read_bytes()).hexdigest()
                Recorded.seen.append((trainer.global_step, digest))

    logger = RuncastLogger(project="lightning", name="after-fit", server=receiver.url, token="t",
                           spool_dir=str(tmp_path / "spool"))
    checkpoints = Recorded(dirpath=tmp_path / "ckpt", every_n_train_steps=2, save_top_k=0, save_last=True)
    trainer = L.Trainer(max_steps=6, logger=logger, callbacks=[checkpoints], log_every_n_steps=1, accelerator="cpu",
                        enable_progress_bar=False, enable_model_summary=False, limit_val_batches=2,
                        check_val_every_n_epoch=100)
    model = _Tiny.make(L)(optim={"name": "sgd", "betas": [0.9, 0.99], "nested": {"x": None}})
    trainer.fit(model, data, data)
    trainer.validate(model, data)
    trainer.test(model, data)
    logger.finish()

    started, metrics, _, finished = _summary(receiver)
    assert started[0]["config"] == {"width": 8, "optim": {"name": "sgd", "betas": [0.9, 0.99], "nested": {"x": None}},
                                    "layers": [8, 4], "model": {"num_parameters": 9}}
    assert sorted(metrics["train/loss"]) == [0, 1, 2, 3, 4, 5]
    assert set(metrics["val/loss"]) == {6} and set(metrics["test/loss"]) == {6}  # after fit, at its last step
    last = [(e["step"], e["sha256"]) for e in receiver.of_type("checkpoint") if e["path"].endswith("last.ckpt")]
    assert [s for s, _ in Recorded.seen] == [2, 4, 6]
    assert last == Recorded.seen  # each save with the file as it was then
    assert len({d for _, d in last}) == 3
    assert [n for n in receiver.of_type("note") if n["text"].startswith("hyperparameters")] == []
    assert finished == ["finished"]


def test_ranks_that_send_nothing_print_no_run_address(receiver, tmp_path, monkeypatch):
    import runcast

    for name in ("RUNCAST_LAUNCH_ID", "TORCHELASTIC_RUN_ID"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("RANK", "1")
    run = runcast.init("p", "r", server=receiver.url, token="t", spool_dir=str(tmp_path), capture_code=False)
    assert not run.enabled and run.url is None  # its id is its own: it names no run on the server
    run.finish()
    monkeypatch.setenv("RANK", "0")
    run = runcast.init("p", "r", server=receiver.url, token="t", spool_dir=str(tmp_path), capture_code=False)
    assert run.url == f"{receiver.url}/runs/{run.id}"
    run.finish()
    # under a launcher every rank derives the launch's run id: rank 1's address is rank 0's run
    monkeypatch.setenv("RUNCAST_LAUNCH_ID", "launch-a")
    monkeypatch.setenv("RANK", "1")
    run = runcast.init("p", "r", server=receiver.url, token="t", spool_dir=str(tmp_path), capture_code=False)
    assert not run.enabled and run.url == f"{receiver.url}/runs/{run.id}"
    run.finish()


def test_the_scripts_own_run_is_the_one_the_callbacks_log_to(receiver, tmp_path):
    """W&B's habit: ``wandb.init(...)`` first, then ``Trainer(report_to="wandb")`` or ``WandbLogger()``
    log into that run. Here too: neither callback opens (and so finishes) a run of its own."""
    pytest.importorskip("transformers")
    import runcast
    from runcast.integrations.lightning import RuncastLogger
    from runcast.integrations.transformers import RuncastCallback

    run = runcast.init(project="hf", name="mine", server=receiver.url, token="t", spool_dir=str(tmp_path))

    class State:
        is_world_process_zero, global_step, best_metric = True, 5, None

    class Args:
        seed, output_dir, run_name = 1, str(tmp_path), None

        def to_dict(self):
            return {"learning_rate": 1e-3, "report_to": ["runcast"], "hub_model_id": None}

    cb = RuncastCallback(project="other", server=receiver.url, token="t")
    cb.on_train_begin(Args(), State(), None)
    assert cb.run is run and runcast.run is run
    cb.on_log(None, State(), None, logs={"loss": 2.5})
    cb.on_train_end(None, State(), None)
    cb.finish()
    logger = RuncastLogger(project="other")
    logger.log_hyperparams({"width": 8})
    logger.log_metrics({"val/loss": 1.5}, step=6)
    logger.finalize("success")
    logger.finish()
    assert not run.finished
    run.flush()
    assert len(receiver.of_type("run_started")) == 1 and receiver.of_type("finished") == []
    assert run.config["training_args"]["learning_rate"] == 1e-3 and run.config["width"] == 8
    assert [(e["step"], e["values"]) for e in receiver.of_type("metrics")] == [(5, {"train/loss": 2.5}), (6, {"val/loss": 1.5})]
    runcast.finish()
