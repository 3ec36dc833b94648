"""The reference trainer's training loop, one named step each: the update's learning rate and data
mix, the forward and backward passes (plain PyTorch or a DeepSpeed engine), the logged metrics,
validation, checkpoints with retention, and the crash it injects on request."""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import torch

from runcast.train import checkpoint as ckpt
from runcast.train.config import TrainConfig
from runcast.train.data import Corpus, Sampler, val_batches
from runcast.train.showcase import log_checkpoint_outputs


@dataclass
class Training:
    """What the loop runs on (made by ``train``) and what it has done so far."""

    cfg: TrainConfig
    run: Any
    model: torch.nn.Module
    optimizer: Any
    engine: Any  # a DeepSpeed engine, or None
    sampler: Sampler
    corpus: Corpus
    out_dir: Path
    accum: int
    tokens_per_step: int
    master_process: bool
    log: Callable[[str], object]
    step: int = 0
    weights: dict[str, float] | None = None  # the mix in force (None: sent on the first step, again after a resume)
    last_val: dict[str, float] = field(default_factory=dict)
    losses: dict[int, float] = field(default_factory=dict)
    lr_scale: float = 1.0  # the team's tunable (control.py): scales the schedule
    saved_step: int | None = None  # the step of the last checkpoint written

    @property
    def net(self) -> Any:
        return self.engine.module if self.engine is not None else self.model


def learning_rate(t: Training, mix: dict[str, float], lr: float) -> float:
    """Send a changed data mix; the update's learning rate with an injected spike (``--inject-spike-at``)."""
    cfg = t.cfg
    if mix != t.weights:
        t.weights = mix
        t.run.data_mix(mix, step=t.step)
        t.log(f"step {t.step}: data mix " + ", ".join(f"{k}={v:.2f}" for k, v in mix.items()))
    if cfg.inject_spike_at is not None and cfg.inject_spike_at <= t.step < cfg.inject_spike_at + cfg.spike_steps:
        if t.step == cfg.inject_spike_at:
            t.run.note(f"fault injection: learning rate x{cfg.spike_factor:g} for {cfg.spike_steps} steps", step=t.step)
        lr *= cfg.spike_factor
    for group in t.optimizer.param_groups:
        group["lr"] = lr
    return lr


def update(t: Training, mix: dict[str, float]) -> tuple[float, float, dict[str, float]]:
    """One optimizer update over ``accum`` micro-batches: mean loss, gradient norm, engine metrics."""
    loss_sum = 0.0
    if t.engine is not None:
        for _ in range(t.accum):  # the engine steps the optimizer at the accumulation boundary
            x, y = (b.to(t.engine.device) for b in t.sampler.batch(mix))
            loss = t.engine(x, y)[1]
            t.engine.backward(loss)
            t.engine.step()
            loss_sum += loss.item()
        from runcast.integrations.deepspeed import engine_metrics

        extra = engine_metrics(t.engine)
        return loss_sum / t.accum, extra.pop("grad_norm", float("nan")), extra
    for _ in range(t.accum):
        x, y = t.sampler.batch(mix)
        loss = t.model(x, y)[1]
        (loss / t.accum).backward()
        loss_sum += loss.item()  # .item() waits for the step's compute: fine on the CPU
    # the norm before clipping; with grad_clip 0 nothing is clipped
    grad_norm = torch.nn.utils.clip_grad_norm_(t.model.parameters(), t.cfg.grad_clip or float("inf")).item()
    t.optimizer.step()
    t.optimizer.zero_grad(set_to_none=True)
    return loss_sum / t.accum, grad_norm, {}


def log_step(t: Training, lr: float, loss: float, grad_norm: float, step_time: float, extra: dict[str, float],
             rss_bytes: int) -> None:
    """The step's metrics to the run (and a line every 10 steps)."""
    t.losses[t.step] = loss
    t.run.log({
        "train/loss": loss,
        "lr": lr,
        "grad_norm": grad_norm,
        "tokens_seen": float(t.step * t.tokens_per_step),
        "tokens_per_s": t.tokens_per_step / step_time,
        "step_time_s": step_time,
        "memory/rss_bytes": float(rss_bytes),
        **extra,
    }, step=t.step)
    if t.step % 10 == 0 or t.step == 1:
        t.log(f"step {t.step}: loss {loss:.4f}, lr {lr:.2e}, grad norm {grad_norm:.3f}, {step_time * 1000:.0f} ms")


def crash_if_asked(t: Training) -> None:
    """``--crash-at``: flush the broadcast (the steps up to the crash show) and die at once."""
    if t.cfg.crash_at is None or t.step != t.cfg.crash_at:
        return
    t.log(f"step {t.step}: crashing on purpose (--crash-at)")
    flush = getattr(t.run, "flush", None)
    if flush is not None:
        flush()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(1)


@torch.no_grad()
def validate(t: Training) -> dict[str, float]:
    """Mean loss on fixed held-out batches, per source and averaged over sources (unweighted)."""
    cfg, net = t.cfg, t.net
    net.eval()
    out = {}
    for source in t.corpus.sources:
        device = next(net.parameters()).device
        losses = [
            net(x.to(device), y.to(device))[1].item()
            for x, y in val_batches(t.corpus, source, cfg.eval_iters, cfg.batch_size, cfg.block_size, cfg.seed)
        ]
        out[f"val/loss_{source}"] = sum(losses) / len(losses)
    out["val/loss"] = sum(out.values()) / len(out)
    net.train()
    return out


def save_checkpoint(t: Training, retention: ckpt.Retention) -> str:
    """Write the checkpoint of this step, report it and its samples, and prune what retention drops; its path."""
    cfg = t.cfg
    state = {
        "step": t.step,
        "config": asdict(cfg),
        "run_id": getattr(t.run, "id", None),
        "manifest_version": t.corpus.version,
        "sampler": t.sampler.state(),
        "rng": ckpt.rng_state(),
        "val": t.last_val,
        "lr_scale": t.lr_scale,
        # the learning-rate schedule is get_lr(cfg, step): restoring step and config restores it
    }
    if t.engine is not None:  # every rank writes its shard; rank 0 adds the trainer state
        path = t.out_dir / f"ckpt_{t.step:07d}"
        t.engine.save_checkpoint(str(t.out_dir), tag=path.name)
        size, sha = 0, None
        if t.master_process:
            ckpt.save(path / "runcast_state.pt", state)
            size = ckpt.dir_size(path)
    else:
        path = t.out_dir / f"ckpt_{t.step:07d}.pt"
        size, sha = ckpt.save(path, {**state, "model": t.model.state_dict(), "optimizer": t.optimizer.state_dict()})
    t.saved_step = t.step
    if not t.master_process:
        return str(path)
    t.run.checkpoint(str(path), step=t.step, metrics=t.last_val)
    whole = t.engine is None or t.engine.zero_optimization_stage() < 3
    log_checkpoint_outputs(t.run, t.net, t.step, t.last_val, cfg.sample_tokens, cfg.block_size, cfg.seed, whole)
    for gone in retention.add(ckpt.Kept(t.step, str(path), t.last_val["val/loss"], size, sha)):
        t.run.checkpoint(gone.path, step=gone.step, metrics={"val/loss": gone.val_loss}, status="pruned")
        t.log(f"step {t.step}: pruned checkpoint {gone.path}")
    return str(path)


def timed(work: Callable[[], tuple[float, float, dict[str, float]]]) -> tuple[float, float, dict[str, float], float]:
    """``work()``'s result and the seconds it took."""
    t0 = time.perf_counter()
    loss, grad_norm, extra = work()
    return loss, grad_norm, extra, time.perf_counter() - t0
