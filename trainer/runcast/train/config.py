"""The reference trainer's settings (``runcast train``'s flags) and the pure functions of them: the
learning-rate schedule and the config a resume continues with."""

from __future__ import annotations

import math
from dataclasses import dataclass, fields
from typing import Any


@dataclass
class TrainConfig:
    # output
    out_dir: str = "out-runcast"
    # model (a few hundred thousand parameters by default: ~30 ms a step on 2 CPU cores)
    n_layer: int = 2
    n_head: int = 4
    n_embd: int = 128
    block_size: int = 64
    dropout: float = 0.0
    # data
    mix: str = "0:code=0.7,prose=0.3"  # STEP:source=weight,...;STEP:... (weights apply from STEP on)
    val_fraction: float = 0.05
    data_limit: int | None = None  # read at most this many files per source (quick runs, tests)
    batch_size: int = 8
    gradient_accumulation_steps: int = 1
    # optimizer: AdamW, learning rate with linear warmup then cosine decay to min_lr
    max_steps: int = 300
    learning_rate: float = 2e-3
    min_lr: float = 2e-4
    warmup_steps: int = 20
    weight_decay: float = 0.1
    beta1: float = 0.9
    beta2: float = 0.95
    grad_clip: float = 1.0  # 0 disables clipping (the grad norm is still logged)
    # evaluation and checkpoints
    eval_interval: int = 50
    eval_iters: int = 4
    ckpt_interval: int = 100
    sample_tokens: int = 48  # at each checkpoint, sampled continuations of fixed prompts (0: none; showcase.py)
    keep_last: int = 2
    keep_best: int = 1
    seed: int = 1337
    # fault injection (not carried over by --resume)
    inject_spike_at: int | None = None
    spike_factor: float = 100.0
    spike_steps: int = 3
    crash_at: int | None = None
    # DeepSpeed: path to a ds_config.json; ZeRO stage, accumulation, bf16, offload come from it
    deepspeed: str | None = None
    # resume from a checkpoint file (or DeepSpeed checkpoint directory)
    resume: str | None = None
    # broadcast
    project: str | None = None  # the token's
    name: str | None = None
    server: str | None = None
    token: str | None = None
    visibility: str = "public"
    public_paths: bool = False  # show paths, host and pid to every reader (runcast.init(public_paths=...))


# Per-invocation settings: never taken from a checkpoint's saved config on --resume.
# Project, name and visibility come back from the checkpoint: a resume continues the same run.
RUNTIME_FIELDS = {"resume", "inject_spike_at", "crash_at", "out_dir", "server", "token"}


def get_lr(cfg: TrainConfig, step: int) -> float:
    """Linear warmup for warmup_steps, then cosine decay to min_lr at max_steps (a pure function of step)."""
    if step < cfg.warmup_steps:
        return cfg.learning_rate * (step + 1) / cfg.warmup_steps
    if step >= cfg.max_steps:
        return cfg.min_lr
    progress = (step - cfg.warmup_steps) / max(1, cfg.max_steps - cfg.warmup_steps)
    return cfg.min_lr + 0.5 * (1.0 + math.cos(math.pi * progress)) * (cfg.learning_rate - cfg.min_lr)


def merge_resumed_config(cfg: TrainConfig, saved: dict[str, Any]) -> TrainConfig:
    """The checkpoint's config, overridden by per-invocation fields and by flags set to non-defaults."""
    defaults = TrainConfig()
    merged = {}
    for f in fields(TrainConfig):
        mine, default = getattr(cfg, f.name), getattr(defaults, f.name)
        if f.name in RUNTIME_FIELDS or f.name not in saved or mine != default:
            merged[f.name] = mine
        else:
            merged[f.name] = saved[f.name]
    return TrainConfig(**merged)
