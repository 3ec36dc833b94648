"""One rank of a two-process Hugging Face or Lightning world on the CPU (torchrun, gloo), for
test_framework_commands: ``python two_ranks.py hf|lightning OUT``. Rank 0's run (RUNCAST_SERVER,
RUNCAST_TOKEN) takes the team's commands; at step 3 the team (TEAM_TOKEN) sends the command in
TEAM_COMMAND (JSON) from rank 0 and the step waits until the SDK holds it. Each rank writes
``OUT/rank<r>.json``: its last step and, per step, the learning rate its optimizer ran with."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Any

import runcast
import torch

from commands.team import deliver

SEND_AT = 3


def team(step: int, out: Path) -> None:
    if step == SEND_AT and int(os.environ["RANK"]) == 0 and runcast.run is not None:
        uid = deliver(os.environ["RUNCAST_SERVER"], os.environ["TEAM_TOKEN"], runcast.run,
                      json.loads(os.environ["TEAM_COMMAND"]))
        (out / "sent.json").write_text(json.dumps({"command": uid, "run": runcast.run.id}))


def hf(out: Path, lrs: dict[int, float]) -> int:
    import transformers
    from runcast.integrations.transformers import RuncastCallback

    class Tokens(torch.utils.data.Dataset):  # type: ignore[type-arg]
        ids = torch.randint(0, 64, (64, 16), generator=torch.Generator().manual_seed(0))

        def __len__(self) -> int:
            return len(self.ids)

        def __getitem__(self, i: int) -> dict[str, torch.Tensor]:
            return {"input_ids": self.ids[i], "labels": self.ids[i]}

    class Team(transformers.TrainerCallback):  # before Runcast's: its on_step_end takes what this sent
        def on_step_begin(self, args: Any, state: Any, control: Any, optimizer: Any = None, **kw: Any) -> None:
            lrs[state.global_step + 1] = optimizer.param_groups[0]["lr"]

        def on_step_end(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
            team(state.global_step, out)

    model = transformers.GPT2LMHeadModel(
        transformers.GPT2Config(n_layer=1, n_head=2, n_embd=16, vocab_size=64, n_positions=16))
    args = transformers.TrainingArguments(
        output_dir=str(out / "hf"), max_steps=40, per_device_train_batch_size=2, logging_steps=1, save_strategy="no",
        report_to=[], use_cpu=True, ddp_backend="gloo", learning_rate=1e-3, lr_scheduler_type="constant", seed=7,
        disable_tqdm=True)
    trainer = transformers.Trainer(model=model, args=args, train_dataset=Tokens(),
                                   callbacks=[Team(), RuncastCallback(project="pp", commands=True)])
    trainer.train()
    return int(trainer.state.global_step)


def lightning(out: Path, lrs: dict[int, float]) -> int:
    import lightning as L
    from runcast.integrations.lightning import RuncastCommands, RuncastLogger

    class Tiny(L.LightningModule):
        def __init__(self) -> None:
            super().__init__()
            self.net = torch.nn.Linear(4, 1)

        def training_step(self, batch: Any, _: int) -> torch.Tensor:
            lrs[self.trainer.global_step + 1] = self.trainer.optimizers[0].param_groups[0]["lr"]
            loss = torch.nn.functional.mse_loss(self.net(batch[0]), batch[1])
            self.log("train/loss", loss)
            return loss

        def configure_optimizers(self) -> Any:
            return torch.optim.SGD(self.parameters(), lr=1e-3)

    class Team(L.Callback):  # before RuncastCommands: its on_train_batch_end takes what this sent
        def on_train_batch_end(self, trainer: Any, *args: Any) -> None:
            team(trainer.global_step, out)

    data = torch.utils.data.TensorDataset(torch.randn(256, 4), torch.randn(256, 1))
    trainer = L.Trainer(max_steps=40, logger=RuncastLogger(project="pp"), callbacks=[Team(), RuncastCommands()],
                        accelerator="cpu", devices=2, strategy="ddp", enable_checkpointing=False,
                        enable_progress_bar=False, enable_model_summary=False, default_root_dir=str(out),
                        log_every_n_steps=1)
    trainer.fit(Tiny(), torch.utils.data.DataLoader(data, batch_size=2))
    return int(trainer.global_step)


def main() -> None:
    framework, out = sys.argv[1], Path(sys.argv[2])
    lrs: dict[int, float] = {}
    last = hf(out, lrs) if framework == "hf" else lightning(out, lrs)
    if runcast.run is not None:
        runcast.run.finish()
    (out / f"rank{os.environ['RANK']}.json").write_text(json.dumps({"step": last, "lr": lrs}))


if __name__ == "__main__":
    main()
