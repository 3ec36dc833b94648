"""The reference trainer behind ``runcast train``: a tiny GPT on local data, broadcast live.

It reads top to bottom: configuration, data, model, optimizer, the learning-rate
schedule, evaluation, then the training loop with its logging, checkpoints and
fault injection. Everything a real pretraining run publishes is here in small:
per-step metrics, validation loss, a data-mix schedule, a dataset manifest,
checkpoints with retention, resumes that open a new segment, spikes and crashes.

    from runcast.train import TrainConfig, train
    train(TrainConfig(max_steps=200, server="http://127.0.0.1:8000", token="rc_..."))
"""

from __future__ import annotations

import json
import math
import os
import random
import sys
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, fields
from pathlib import Path
from typing import Any

import numpy as np
import torch

from runcast.train import checkpoint as ckpt
from runcast.train.data import Sampler, build_corpus, mix_at, parse_mix, val_batches
from runcast.train.model import GPT, GPTConfig
from runcast.train.showcase import log_checkpoint_outputs


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


def rss_bytes() -> int:
    """Resident memory of this process (Linux /proc; peak RSS elsewhere)."""
    try:
        with open("/proc/self/statm") as f:
            return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    except OSError:
        import resource

        peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
        return peak if sys.platform == "darwin" else peak * 1024


class OfflineRun:
    """Stands in for a Runcast run when no server is configured: the trainer's calls do nothing."""

    id = None

    def __getattr__(self, name: str) -> Callable[..., None]:
        return lambda *args, **kwargs: None


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


def train(cfg: TrainConfig, run: Any = None, log: Callable[[str], object] = print) -> dict[str, Any]:
    """Train, broadcasting to ``run`` (made from cfg.server/token when None). Returns a summary."""
    # -- resume: the saved config wins, except per-invocation settings -------------------
    resume_state = None
    resume_path: Path | None = None
    if cfg.resume:
        resume_path = Path(cfg.resume)
        resume_state = ckpt.load(resume_path / "runcast_state.pt" if resume_path.is_dir() else resume_path)
        cfg = merge_resumed_config(cfg, resume_state["config"])
    out_dir = Path(cfg.out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)

    # -- distributed set-up: DeepSpeed picks its own ranks; only rank 0 broadcasts --------
    engine = None
    rank, world_size = int(os.environ.get("RANK", "0")), int(os.environ.get("WORLD_SIZE", "1"))
    if cfg.deepspeed:
        from runcast.integrations.deepspeed import init_cpu_distributed

        init_cpu_distributed()
    master_process = rank == 0

    random.seed(cfg.seed + rank)
    np.random.seed(cfg.seed + rank)
    torch.manual_seed(cfg.seed + rank)

    # -- data --------------------------------------------------------------------------
    schedule = parse_mix(cfg.mix)
    corpus = build_corpus(cfg.val_fraction, cfg.data_limit, min_tokens=cfg.block_size + 2)
    sampler = Sampler(corpus, cfg.batch_size, cfg.block_size, seed=cfg.seed + rank)
    log(
        f"data {corpus.version}: "
        + ", ".join(f"{n} {s.train.size:,} train / {s.val.size:,} val tokens" for n, s in corpus.sources.items())
        + f"; {corpus.duplicates_removed} exact duplicates removed"
    )

    # -- model and optimizer ------------------------------------------------------------
    model_cfg = GPTConfig(cfg.n_layer, cfg.n_head, cfg.n_embd, cfg.block_size, 256, cfg.dropout)
    model = GPT(model_cfg)
    n_params = model.num_params()
    decay = [p for p in model.parameters() if p.dim() >= 2]  # matrices and embeddings
    no_decay = [p for p in model.parameters() if p.dim() < 2]  # biases and norms
    param_groups = [{"params": decay, "weight_decay": cfg.weight_decay}, {"params": no_decay, "weight_decay": 0.0}]
    accum = cfg.gradient_accumulation_steps
    ds_config = None
    if cfg.deepspeed:
        from runcast.integrations.deepspeed import initialize

        engine, optimizer, ds_config = initialize(model, param_groups, cfg)
        accum = engine.gradient_accumulation_steps()
        micro_batch = engine.train_micro_batch_size_per_gpu()
        if micro_batch != cfg.batch_size:
            sampler.batch_size = cfg.batch_size = micro_batch
    else:
        optimizer = torch.optim.AdamW(param_groups, lr=cfg.learning_rate, betas=(cfg.beta1, cfg.beta2))
    log(f"model: {n_params:,} parameters ({cfg.n_layer} layers, {cfg.n_embd} wide, context {cfg.block_size})")

    step = 0
    if resume_state is not None and resume_path is not None:  # (set together)
        if engine is not None:
            engine.load_checkpoint(str(resume_path.parent), tag=resume_path.name)
        else:
            model.load_state_dict(resume_state["model"])
            optimizer.load_state_dict(resume_state["optimizer"])
        step = resume_state["step"]
        sampler.load_state(resume_state["sampler"])
        ckpt.set_rng_state(resume_state["rng"])
        log(f"resumed from {cfg.resume} at step {step}")

    # -- the broadcast --------------------------------------------------------------------
    if run is None:
        run = open_run(cfg, n_params, resume_state, log, ds_config) if master_process else OfflineRun()
    run_id = getattr(run, "id", None)
    manifest_version = resume_state.get("manifest_version") if resume_state else None
    if corpus.version != manifest_version:
        if manifest_version:
            log(f"warning: the data changed since the checkpoint ({manifest_version} -> {corpus.version})")
        run.manifest(corpus.manifest(), version=corpus.version, step=step)
    weights = None  # sent on the first step (again after a resume: a new segment starts with its mix)

    @torch.no_grad()
    def estimate_val_loss() -> dict[str, float]:
        """Mean loss on fixed held-out batches, per source and averaged over sources (unweighted)."""
        net = engine.module if engine is not None else model
        net.eval()
        out = {}
        for source in corpus.sources:
            device = next(net.parameters()).device
            losses = [
                net(x.to(device), y.to(device))[1].item()
                for x, y in val_batches(corpus, source, cfg.eval_iters, cfg.batch_size, cfg.block_size, cfg.seed)
            ]
            out[f"val/loss_{source}"] = sum(losses) / len(losses)
        out["val/loss"] = sum(out.values()) / len(out)
        net.train()
        return out

    # -- training loop --------------------------------------------------------------------
    retention = ckpt.Retention(out_dir, cfg.keep_last, cfg.keep_best)
    tokens_per_step = cfg.batch_size * cfg.block_size * accum * world_size
    last_val: dict[str, float] = {}
    losses: dict[int, float] = {}
    status = "finished"
    try:
        while step < cfg.max_steps:
            # the data mix and the learning rate for this update (both functions of step)
            mix = mix_at(schedule, step)
            if mix != weights:
                weights = mix
                run.data_mix(weights, step=step)
                log(f"step {step}: data mix " + ", ".join(f"{k}={v:.2f}" for k, v in weights.items()))
            lr = get_lr(cfg, step)
            if cfg.inject_spike_at is not None and cfg.inject_spike_at <= step < cfg.inject_spike_at + cfg.spike_steps:
                if step == cfg.inject_spike_at:
                    run.note(f"fault injection: learning rate x{cfg.spike_factor:g} for {cfg.spike_steps} steps", step=step)
                lr *= cfg.spike_factor
            for group in optimizer.param_groups:
                group["lr"] = lr

            t0 = time.perf_counter()
            loss_sum = 0.0
            if engine is not None:
                for _ in range(accum):  # the engine steps the optimizer at the accumulation boundary
                    x, y = (t.to(engine.device) for t in sampler.batch(mix))
                    loss = engine(x, y)[1]
                    engine.backward(loss)
                    engine.step()
                    loss_sum += loss.item()
                from runcast.integrations.deepspeed import engine_metrics

                extra = engine_metrics(engine)
                grad_norm = extra.pop("grad_norm", float("nan"))
            else:
                for _ in range(accum):
                    x, y = sampler.batch(mix)
                    loss = model(x, y)[1]
                    (loss / accum).backward()
                    loss_sum += loss.item()  # .item() waits for the step's compute: fine on the CPU
                # the norm before clipping; with grad_clip 0 nothing is clipped
                grad_norm = torch.nn.utils.clip_grad_norm_(model.parameters(), cfg.grad_clip or float("inf")).item()
                optimizer.step()
                optimizer.zero_grad(set_to_none=True)
                extra = {}
            step_time = time.perf_counter() - t0
            step += 1

            train_loss = loss_sum / accum
            losses[step] = train_loss
            metrics = {
                "train/loss": train_loss,
                "lr": lr,
                "grad_norm": grad_norm,
                "tokens_seen": float(step * tokens_per_step),
                "tokens_per_s": tokens_per_step / step_time,
                "step_time_s": step_time,
                "memory/rss_bytes": float(rss_bytes()),
                **extra,
            }
            run.log(metrics, step=step)
            if step % 10 == 0 or step == 1:
                log(f"step {step}: loss {train_loss:.4f}, lr {lr:.2e}, grad norm {grad_norm:.3f}, {step_time * 1000:.0f} ms")

            if cfg.crash_at is not None and step == cfg.crash_at:
                log(f"step {step}: crashing on purpose (--crash-at)")
                flush = getattr(run, "flush", None)
                if flush is not None:  # let the broadcast show the steps up to the crash
                    flush()
                sys.stdout.flush()
                sys.stderr.flush()
                os._exit(1)

            is_ckpt = step % cfg.ckpt_interval == 0 or step == cfg.max_steps
            if step % cfg.eval_interval == 0 or is_ckpt:
                last_val = estimate_val_loss()
                run.log(last_val, step=step)
                log(f"step {step}: val loss {last_val['val/loss']:.4f}")

            if is_ckpt:
                state = {
                    "step": step,
                    "config": asdict(cfg),
                    "run_id": run_id,
                    "manifest_version": corpus.version,
                    "sampler": sampler.state(),
                    "rng": ckpt.rng_state(),
                    "val": last_val,
                    # the learning-rate schedule is get_lr(cfg, step): restoring step and config restores it
                }
                if engine is not None:  # every rank writes its shard; rank 0 adds the trainer state
                    path = out_dir / f"ckpt_{step:07d}"
                    engine.save_checkpoint(str(out_dir), tag=path.name)
                    size, sha = 0, None
                    if master_process:
                        ckpt.save(path / "runcast_state.pt", state)
                        size = ckpt.dir_size(path)
                else:
                    path = out_dir / f"ckpt_{step:07d}.pt"
                    size, sha = ckpt.save(path, {**state, "model": model.state_dict(), "optimizer": optimizer.state_dict()})
                if master_process:
                    run.checkpoint(str(path), step=step, metrics=last_val)
                    whole = engine is None or engine.zero_optimization_stage() < 3
                    log_checkpoint_outputs(run, engine.module if engine is not None else model, step, last_val,
                                           cfg.sample_tokens, cfg.block_size, cfg.seed, whole)
                    for gone in retention.add(ckpt.Kept(step, str(path), last_val["val/loss"], size, sha)):
                        run.checkpoint(gone.path, step=gone.step, metrics={"val/loss": gone.val_loss}, status="pruned")
                        log(f"step {step}: pruned checkpoint {gone.path}")
    except KeyboardInterrupt:
        status = "killed"
        raise
    except BaseException:
        status = "failed"
        raise
    finally:
        run.finish(status=status)
    return {"step": step, "losses": losses, "val": last_val, "run_id": run_id, "params": n_params,
            "checkpoints": [asdict(k) for k in retention.kept], "corpus": corpus.version}


def open_run(cfg: TrainConfig, n_params: int, resume_state: dict[str, Any] | None, log: Callable[[str], object],
             ds_config: dict[str, Any] | None = None) -> Any:
    """A Runcast run when a server is configured (flag or RUNCAST_SERVER), else an offline stand-in."""
    server = cfg.server or os.environ.get("RUNCAST_SERVER")
    token = cfg.token or os.environ.get("RUNCAST_TOKEN")
    if not server:
        log("no Runcast server (--server or RUNCAST_SERVER): training offline, nothing is broadcast")
        return OfflineRun()
    import runcast

    config = {k: v for k, v in asdict(cfg).items() if k not in ("token", "server", "resume")}
    config["n_params"] = n_params  # the run page's memory estimate reads it (with env.world_size)
    if ds_config:  # the DeepSpeed config in force (ZeRO stage, offload: the memory estimate reads them too)
        config["ds_config"] = json.loads(json.dumps(ds_config, default=str))
    resume = {}
    if resume_state is not None and resume_state.get("run_id"):
        resume = {"resume": resume_state["run_id"], "resume_step": resume_state["step"]}
    run = runcast.init(
        project=cfg.project,
        name=cfg.name or f"tinygpt-{cfg.n_layer}x{cfg.n_embd}",
        config=config,
        server=server,
        token=token,
        seed=cfg.seed,
        visibility=cfg.visibility,
        public_paths=cfg.public_paths,
        **resume,
    )
    log(f"broadcasting to {server} as run {getattr(run, 'id', '?')}" + (f" (resumed at step {resume['resume_step']})" if resume else ""))
    return run


def config_json(cfg: TrainConfig) -> str:
    return json.dumps({k: v for k, v in asdict(cfg).items() if k != "token"}, indent=2)
