"""HF Transformers callback and Lightning logger, each on a tiny real model against a real receiver."""

from __future__ import annotations

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
    from runcast.integrations.transformers import RuncastCallback, map_key

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
                                    eval_dataset=TokenData(8, 1), callbacks=[callback])

    trainer(6).train()
    started, metrics, ckpts, finished = _summary(receiver)
    assert len(started) == 1 and started[0]["config"]["model"]["n_embd"] == 32 and started[0]["seed"] == 7
    assert sorted(metrics["train/loss"]) == [1, 2, 3, 4, 5, 6]
    assert sorted(metrics["eval/loss"]) == [3, 6]
    assert set(metrics["lr"]) == set(metrics["grad_norm"]) == {1, 2, 3, 4, 5, 6}
    assert metrics["lr"][1] > 0 and metrics["grad_norm"][1] > 0
    assert ckpts == [(3, "available", "checkpoint-3"), (6, "available", "checkpoint-6"), (3, "pruned", "checkpoint-3")]
    assert finished == ["finished"]

    # resume from the last checkpoint: the same run, a new segment at step 6
    trainer(9).train(resume_from_checkpoint=str(tmp_path / "hf" / "checkpoint-6"))
    started, metrics, ckpts, finished = _summary(receiver)
    assert len(started) == 2 and started[1]["run"] == started[0]["run"] and started[1]["resume_step"] == 6
    assert sorted(metrics["train/loss"]) == [1, 2, 3, 4, 5, 6, 7, 8, 9]
    assert finished == ["finished", "finished"]
    assert map_key("eval_runtime") == "eval/runtime" and map_key("train_loss") == "train/mean_loss"


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

    started, metrics, ckpts, finished = _summary(receiver)
    assert len(started) == 1 and started[0]["config"] == {"width": 8}
    assert sorted(metrics["train/loss"]) == [0, 1, 2, 3, 4, 5]
    available = [c for c in ckpts if c[1] == "available"]
    steps = [c[0] for c in available]  # save_top_k=1 writes a checkpoint only when train/loss improved
    assert steps[0] == 2 and set(steps) <= {2, 4, 6} and steps == sorted(steps)
    kept = [p.name for p in (tmp_path / "ckpt").iterdir()]
    assert len(kept) == 1 and sorted(c[2] for c in ckpts if c[1] == "pruned") == sorted(
        c[2] for c in available if c[2] not in kept)
    assert finished == ["finished"]
