"""What each doc page's examples assume, which the page says in words: the token's project, the
runs and files a reader would already have, what its placeholders stand for, and the names a
Python fragment takes from the code around it.

``preludes`` and ``output_files`` name a block by a piece of its text;
tests/docs/test_docs_blocks.py checks that each piece names exactly one example of its page,
and that each substituted text is in one.
"""

from __future__ import annotations

from dataclasses import dataclass, field

# In every page: the docs' server address and token placeholder, and the checkout's .venv.
COMMON = {
    "http://127.0.0.1:8000": "{url}",
    "rc_...": "{token}",
    ".venv/bin/": "{bin}/",
    ".venv/lib/python3.11/site-packages/": "{site}/",
}


@dataclass(frozen=True)
class Page:
    """One doc page's world (tests/docs/workspace.py builds it)."""

    # The project of the token `runcast token create --project` makes for the page.
    project: str = "demo"
    server: bool = True
    # RUNCAST_SERVER and RUNCAST_TOKEN set, as the page says a reader has them.
    client_env: bool = True
    server_env: dict[str, str] = field(default_factory=dict)
    # Python scripts run before the first example: the runs and files the page assumes.
    setup: tuple[str, ...] = ()
    # Python started before the first example and stopped after the last (a job that goes on logging).
    background: str = ""
    # Text in the page's examples -> its value here, formatted with Workspace.values().
    substitutions: dict[str, str] = field(default_factory=dict)
    # A piece of a Python block -> Python run before it: the names the fragment takes as given.
    preludes: dict[str, str] = field(default_factory=dict)
    # A piece of a block -> the file (in the working directory) its documented output is in.
    output_files: dict[str, str] = field(default_factory=dict)
    timeout_s: float = 240


# The end of a setup script whose run stays ``running``, as a training job that is still on: sent, not finished.
_STAYS_RUNNING = "run.flush()\nos._exit(0)\n"


# api.md: run q3VfX0c8kPZ2 of project gpt-small, still running, resumed once at step 8000 (the
# doc's examples), with a checkpoint at step 8000 and a loss of 10.98, NaN, ..., Infinity.
_API_RUN = (
    """
import os, pathlib, runcast
storage = pathlib.Path(os.environ["RUNCAST_DATA_DIR"]) / "storage"
(storage / "gpt-small").mkdir(parents=True, exist_ok=True)
run = runcast.init(project="gpt-small", name="lr-3e-4", id="q3VfX0c8kPZ2", config={"lr": 3e-4}, tags=["baseline"],
                   group="lr-sweep", job_type="train", checkpoint_dir=storage)
for step in range(8211):
    loss = {0: 10.98, 1: float("nan"), 8200: float("inf")}.get(step, 3 - step / 10_000)
    run.log({"train/loss": loss, "lr": 3e-4}, step=step)
    if step == 8000:
        (storage / "gpt-small" / "8000.pt").write_bytes(b"weights" * 1000)
        run.checkpoint(str(storage / "gpt-small" / "8000.pt"), step=8000, metrics={"val/loss": 2.98})
"""
    + _STAYS_RUNNING
)
_API_RESUME = (
    """
import os, runcast
run = runcast.init(project="gpt-small", resume="q3VfX0c8kPZ2", resume_step=8000)
for step in range(8001, 12001):
    run.log({"train/loss": 2.9 - step / 100_000, "lr": 3e-4}, step=step)
"""
    + _STAYS_RUNNING
)

# artifacts.md: checkpoint files recorded before the per-project layout (run1/step100.pt, named by
# two checkpoint events of project gpt), for `runcast storage migrate`.
_LEGACY_CHECKPOINT = """
import os, pathlib, time, httpx
storage = pathlib.Path(os.environ["RUNCAST_DATA_DIR"]) / "storage"
(storage / "run1").mkdir(parents=True)
(storage / "run1" / "step100.pt").write_bytes(b"weights")
for run in ("legacy-run-0001", "legacy-run-0002"):
    events = [{"type": "run_started", "run": run, "segment": "segment-0001", "seq": 0, "ts": time.time(),
               "project": "gpt", "name": run},
              {"type": "checkpoint", "run": run, "segment": "segment-0001", "seq": 1, "ts": time.time(), "step": 100,
               "path": "run1/step100.pt", "size": 7, "sha256": None, "metrics": {}, "public": True,
               "status": "available"}]
    answer = httpx.post(os.environ["RUNCAST_SERVER"] + "/api/v1/ingest", json={"v": 1, "events": events},
                        headers={"Authorization": "Bearer " + os.environ["RUNCAST_TOKEN"]})
    answer.raise_for_status()
"""

# sharing.md: run q3VfX0c8kPZ2 with a train/loss from step 0 to 59,900.
_SHARED_RUN = """
import runcast
run = runcast.init(project="demo", name="baseline", id="q3VfX0c8kPZ2")
for step in range(0, 60_000, 100):
    run.log({"train/loss": 4 / (1 + step / 5000)}, step=step)
run.finish()
"""

# live.md: run M0piscpJI9igiF-2 running, and a training job that goes on logging (every 2 s: the
# stream's keep-alive, set to 1 s, shows between its messages).
_LIVE_RUN = (
    """
import os, runcast
run = runcast.init(project="demo", name="live", id="M0piscpJI9igiF-2")
run.log({"loss": 0.5, "lr": 0.1}, step=1)
"""
    + _STAYS_RUNNING
)
_LIVE_TRAINING = """
import time, runcast
run = runcast.init(project="demo", resume="M0piscpJI9igiF-2", flush_interval=0.1)
for step in range(2, 200):
    run.log({"loss": 1 / step, "lr": 0.1}, step=step)
    if step % 3 == 0:
        run.note("hi", step=step)
    time.sleep(2)
"""

# sdk.md: a run recorded offline, waiting in the spool (~/.cache/runcast/spool) for `runcast sync`.
_OFFLINE_RUN = """
import runcast
run = runcast.init(project="tinygpt", name="offline", mode="offline")
for step in range(100):
    run.log({"train/loss": 1 / (1 + step)}, step=step)
run.finish()
"""

# sdk.md: run tinyGPTbase01 of project tinygpt (tag baseline, a checkpoint at step 50, resumed at step 60)
# and the private run tinyGPTsecret, for "Querying runs from Python".
_QUERY_RUNS = (
    """
import os, pathlib, runcast
storage = pathlib.Path(os.environ["RUNCAST_DATA_DIR"]) / "storage"
(storage / "tinygpt").mkdir(parents=True, exist_ok=True)
run = runcast.init(project="tinygpt", name="baseline", id="tinyGPTbase01", config={"lr": 3e-4}, tags=["baseline"],
                   group="lr-sweep", notes="the reference run", checkpoint_dir=storage, system_metrics=False)
for step in range(80):
    run.log({"train/loss": 3 - step / 100}, step=step)
    if step % 10 == 0:
        run.log({"val/loss": 3.1 - step / 100}, step=step)
    if step == 50:
        (storage / "tinygpt" / "50.pt").write_bytes(b"weights" * 100)
        run.checkpoint(str(storage / "tinygpt" / "50.pt"), step=50, metrics={"val/loss": 2.6})
run.finish()
run = runcast.init(project="tinygpt", resume="tinyGPTbase01", resume_step=60, system_metrics=False)
for step in range(61, 100):
    run.log({"train/loss": 2.4 - step / 1000}, step=step)
    if step % 10 == 0:
        run.log({"val/loss": 2.5 - step / 1000}, step=step)
run.summary["best_val_loss"] = 2.41
run.finish()
secret = runcast.init(project="tinygpt", name="secret", id="tinyGPTsecret", visibility="private", system_metrics=False)
secret.finish()
"""
)

# import.md: the sources the examples import, written by the tools themselves where that is quick.
_IMPORT_SOURCES = """
import csv, json, os, pathlib, subprocess, sys, time
from tensorboard.summary import Writer
writer = Writer("runs/baseline")
for s in range(50):
    writer.add_scalar("train/loss", 1.0 / (1 + s), s, wall_time=1_700_000_000 + s)
writer.close()
os.environ["MLFLOW_ALLOW_FILE_STORE"] = "true"
from mlflow import MlflowClient
client = MlflowClient(tracking_uri="file:" + os.path.abspath("mlruns"))
run = client.create_run(client.create_experiment("pretrain"), run_name="baseline").info.run_id
for s in range(50):
    client.log_metric(run, "train/loss", 3.0 / (1 + s), step=s)
client.set_terminated(run, "FINISHED")
env = {**os.environ, "WANDB_MODE": "offline", "WANDB_SILENT": "true", "WANDB_DIR": os.getcwd(),
       "WANDB_DISABLE_GIT": "true", "WANDB_API_KEY": ""}
subprocess.run([sys.executable, "-c", "import wandb; r = wandb.init(project='p', name='baseline');"
                "[r.log({'loss': 1 / (1 + s)}, step=s) for s in range(20)]; r.finish()"], env=env, check=True)
with open("wandb_export.csv", "w", newline="") as f:
    out = csv.writer(f)
    out.writerow(["Step", "baseline - train/loss", "baseline - train/loss__MIN", "baseline - train/loss__MAX"])
    out.writerows([s, 1 / (1 + s), 1 / (1 + s), 1 / (1 + s)] for s in range(50))
with open("train_log.jsonl", "w") as f:
    for s in range(50):
        f.write(json.dumps({"step": s, "loss": 2 / (1 + s), "learning_rate": 3e-4, "timestamp": 1_700_000_000 + s}) + "\\n")
with open("runcast-AbC123.jsonl", "w") as f:
    for s in range(50):
        f.write(json.dumps({"segment": 0, "key": "train/loss", "step": s, "value": 1 / (1 + s)}) + "\\n")
"""

# trainer.md: a recorded training log to replay (the seed format, a tenth of a second per step).
_RECORDED_LOG = """
import json
with open("run.jsonl", "w") as f:
    for s in range(1, 41):
        f.write(json.dumps({"step": s, "loss": 3 / s, "learning_rate": 3e-4, "timestamp": 1_700_000_000 + s / 10}) + "\\n")
"""

_HF_SAVE_MODEL = """
class HFTrainer:  # stands for a transformers.Trainer: save_model writes a directory
    def save_model(self, path):
        os.makedirs(path, exist_ok=True)
        torch.save(model.state_dict(), os.path.join(path, "pytorch_model.bin"))
trainer = HFTrainer()
"""
_SDK_LOOP = """
cfg = {"lr": 3e-4, "n_layer": 2}
max_steps, lr, val, tokens = 2001, 3e-4, 2.5, 2001 * 4096
def train_step():
    return 2.0
os.makedirs("ckpt", exist_ok=True)  # where the loop saves its checkpoints
"""
_TINY_TORCH = """
import os
import torch
import runcast
TOKEN = os.environ["RUNCAST_TOKEN"]
model = torch.nn.Linear(8, 8)
"""

# integrations.md: what each fragment takes from the code around it.
_PLAIN_TORCH_LOOP = """
import argparse
import torch
cfg = argparse.Namespace(max_steps=3, batch_size=16, lr=3e-3, warmup=10, seed=0)  # examples/plain_torch.py's arguments
it, lr, loss, grad_norm = 1, 3e-3, torch.tensor(2.5), torch.tensor(0.7)
"""
_HF_TRAINER = """
import os
import torch
from transformers import GPT2Config, GPT2LMHeadModel, Trainer, TrainingArguments
URL, TOKEN = os.environ["RUNCAST_SERVER"], os.environ["RUNCAST_TOKEN"]
model = GPT2LMHeadModel(GPT2Config(n_layer=1, n_head=2, n_embd=32, vocab_size=64, n_positions=16))
class Tokens(torch.utils.data.Dataset):
    def __len__(self):
        return 16
    def __getitem__(self, i):
        ids = (torch.arange(16) + i) % 64
        return {"input_ids": ids, "labels": ids}
ds = ev = Tokens()
args = TrainingArguments(output_dir="hf-out", max_steps=4, per_device_train_batch_size=4, logging_steps=1,
                         report_to=[], use_cpu=True, save_strategy="no")
"""
_LIGHTNING_MODEL = """
import lightning as L
import torch
class Model(L.LightningModule):
    def __init__(self):
        super().__init__()
        self.layer = torch.nn.Linear(4, 1)
    def loss(self, batch):
        x, y = batch
        return torch.nn.functional.mse_loss(self.layer(x), y)
    def training_step(self, batch, i):
        loss = self.loss(batch)
        self.log("train/loss", loss)
        return loss
    def validation_step(self, batch, i):
        self.log("val/loss", self.loss(batch))
    def test_step(self, batch, i):
        self.log("test/loss", self.loss(batch))
    def configure_optimizers(self):
        return torch.optim.SGD(self.parameters(), lr=0.1)
data = torch.utils.data.TensorDataset(torch.randn(32, 4), torch.randn(32, 1))
train_loader = val_loader = test_loader = torch.utils.data.DataLoader(data, batch_size=8)
model = Model()
"""

PAGES: dict[str, Page] = {
    "README.md": Page(),
    "docs/alerts.md": Page(project="p", preludes={"alerts={": "import runcast"}),
    "docs/api.md": Page(
        project="gpt-small",
        setup=(_API_RUN, _API_RESUME),
        output_files={"export?format=csv": "runcast-q3VfX0c8kPZ2.csv"},
    ),
    "docs/artifacts.md": Page(
        project="gpt",
        setup=(_LEGACY_CHECKPOINT,),
        substitutions={"https://runcast.example.org": "{url}", "/mnt/shared/runcast-storage": "{storage}"},
        preludes={
            "trainer.save_model": _TINY_TORCH + _HF_SAVE_MODEL,
            "checkpoint_dir=": _TINY_TORCH,
        },
    ),
    "docs/cli.md": Page(setup=(_SHARED_RUN,), substitutions={"RUN ": "q3VfX0c8kPZ2 "}),
    "docs/deployment.md": Page(server=False),
    "docs/import.md": Page(setup=(_IMPORT_SOURCES,)),
    "docs/ingest.md": Page(project="my-llm"),
    "docs/integrations.md": Page(
        project="examples",
        preludes={
            "grad_norm.item()": _PLAIN_TORCH_LOOP,
            "RuncastCallback(": _HF_TRAINER,
            "RuncastLogger(": _LIGHTNING_MODEL,
        },
    ),
    "docs/live.md": Page(server_env={"RUNCAST_STREAM_KEEPALIVE_S": "1"}, setup=(_LIVE_RUN,), background=_LIVE_TRAINING),
    "docs/sdk.md": Page(
        project="tinygpt",
        setup=(_OFFLINE_RUN, _QUERY_RUNS),
        substitutions={
            "http://runcast.example.org:8000": "{url}",
            "DIR": "~/.cache/runcast/spool",
            "http://host:8000": "{url}",
            "--token T": "--token {token}",
        },
        preludes={
            "train_step()": _TINY_TORCH + _SDK_LOOP,
            "run.set_policy": "import runcast",
        },
    ),
    "docs/samples.md": Page(
        preludes={
            "run.log_samples(": "import numpy as np, runcast, torch\n"
                                "run = runcast.init(project='demo', name='samples')\n"
                                "array_or_tensor_or_pil_or_path_or_bytes = np.zeros((64, 96, 3), dtype=np.uint8)\n"
                                "tensor = torch.randn(10_000)\n",
        },
    ),
    "docs/sharing.md": Page(setup=(_SHARED_RUN,), substitutions={"https://runs.example.org": "{url}"}),
    "docs/trainer.md": Page(client_env=False, setup=(_RECORDED_LOG,)),
}


def page(doc: str) -> Page:
    return PAGES.get(doc, Page())
