"""A nanoGPT-style training loop in plain torch that broadcasts with three added lines.

    python examples/plain_torch.py                                   # one process
    torchrun --nproc_per_node 2 examples/plain_torch.py              # DDP over gloo
    RUNCAST_SERVER=http://127.0.0.1:8000 RUNCAST_TOKEN=rc_... python examples/plain_torch.py

The three lines are marked "# runcast". Only rank 0 sends (the SDK reads RANK); the run
finishes by itself when the process exits (as "failed" after an uncaught exception).
Without RUNCAST_SERVER the SDK spools the events locally for `runcast sync`.
"""

import argparse
import math
import os

import torch
import torch.distributed as dist
import torch.nn.functional as F

import runcast  # runcast

parser = argparse.ArgumentParser()
parser.add_argument("--max-steps", type=int, default=200)
parser.add_argument("--batch-size", type=int, default=16)
parser.add_argument("--lr", type=float, default=3e-3)
parser.add_argument("--warmup", type=int, default=10)
parser.add_argument("--seed", type=int, default=0)
cfg = parser.parse_args()

# distributed set-up: torchrun sets RANK / WORLD_SIZE; gloo works without a GPU
ddp = int(os.environ.get("WORLD_SIZE", 1)) > 1
if ddp:
    dist.init_process_group("gloo")
rank = dist.get_rank() if ddp else 0
torch.manual_seed(cfg.seed + rank)

# a toy task: predict the next value of a noisy sine wave from the 16 before it
model = torch.nn.Sequential(torch.nn.Linear(16, 64), torch.nn.GELU(), torch.nn.Linear(64, 1))
if ddp:
    model = torch.nn.parallel.DistributedDataParallel(model)
optimizer = torch.optim.AdamW(model.parameters(), lr=cfg.lr)


def get_batch():
    start = torch.rand(cfg.batch_size, 1) * 100
    t = start + torch.arange(17) * 0.3
    wave = torch.sin(t) + 0.05 * torch.randn_like(t)
    return wave[:, :16], wave[:, 16:]


def get_lr(it):
    if it < cfg.warmup:
        return cfg.lr * (it + 1) / cfg.warmup
    return cfg.lr * 0.5 * (1 + math.cos(math.pi * (it - cfg.warmup) / max(1, cfg.max_steps - cfg.warmup)))


run = runcast.init(project="examples", name="plain-torch", config=vars(cfg), seed=cfg.seed)  # runcast
for it in range(cfg.max_steps):
    lr = get_lr(it)
    for group in optimizer.param_groups:
        group["lr"] = lr
    x, y = get_batch()
    loss = F.mse_loss(model(x), y)
    optimizer.zero_grad(set_to_none=True)
    loss.backward()
    grad_norm = torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
    optimizer.step()
    if rank == 0:
        run.log({"train/loss": loss.item(), "lr": lr, "grad_norm": grad_norm.item()}, step=it)  # runcast
        if it % 50 == 0:
            print(f"step {it}: loss {loss.item():.4f}")

if ddp:
    dist.destroy_process_group()
