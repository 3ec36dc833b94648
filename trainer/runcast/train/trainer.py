"""The reference trainer behind ``runcast train``: a tiny GPT on local data, broadcast live.

``train`` reads top to bottom, one named step each: the resumed configuration (config.py),
data, model and optimizer, the restored state, the run, then the training loop (loop.py:
learning rate, update, logging, validation, checkpoints, fault injection). Everything a real pretraining run publishes is here in small:
per-step metrics, validation loss, a data-mix schedule, a dataset manifest,
checkpoints with retention, resumes that open a new segment, spikes and crashes.

    from runcast.train import TrainConfig, train
    train(TrainConfig(max_steps=200, server="http://127.0.0.1:8000", token="rc_..."))
"""

from __future__ import annotations

import json
import os
import random
import sys
from collections.abc import Callable
from dataclasses import asdict
from pathlib import Path
from typing import Any

import numpy as np
import torch

from runcast.integrations._ranks import torch_ranks
from runcast.train import checkpoint as ckpt
from runcast.train import loop
from runcast.train.config import TrainConfig, get_lr, merge_resumed_config
from runcast.train.control import Control, restored_scale
from runcast.train.data import Corpus, Sampler, build_corpus, mix_at, parse_mix
from runcast.train.loop import Training
from runcast.train.model import GPT, GPTConfig


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


def train(cfg: TrainConfig, run: Any = None, log: Callable[[str], object] = print) -> dict[str, Any]:
    """Train, broadcasting to ``run`` (made from cfg.server/token when None). Returns a summary."""
    cfg, resume_state, resume_path = resumed_config(cfg)
    out_dir = Path(cfg.out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    rank, world_size = distributed(cfg)
    schedule = parse_mix(cfg.mix)
    corpus, sampler = build_data(cfg, rank, log)
    model, optimizer, engine, accum, ds_config, n_params = build_model(cfg, sampler, log)
    step = 0
    if resume_state is not None and resume_path is not None:  # (set together)
        step = restore(cfg, resume_state, resume_path, model, optimizer, engine, sampler, log)
    if run is None:
        run = open_run(cfg, n_params, resume_state, log, ds_config) if rank == 0 else OfflineRun()
    announce_data(run, corpus, resume_state, step, log)
    t = Training(cfg=cfg, run=run, model=model, optimizer=optimizer, engine=engine, sampler=sampler, corpus=corpus,
                 out_dir=out_dir, accum=accum, tokens_per_step=cfg.batch_size * cfg.block_size * accum * world_size,
                 master_process=rank == 0, log=log, step=step, lr_scale=restored_scale(resume_state))
    retention = ckpt.Retention(out_dir, cfg.keep_last, cfg.keep_best)
    control = Control(t, retention, torch_ranks(world_size))
    status = "finished"
    try:
        while t.step < cfg.max_steps and not control.act():
            train_step(t, mix_at(schedule, t.step), retention)
    except KeyboardInterrupt:
        status = "killed"
        raise
    except BaseException:
        status = "failed"
        raise
    finally:
        run.finish(status=status)
    return {"step": t.step, "losses": t.losses, "val": t.last_val, "run_id": getattr(run, "id", None),
            "params": n_params, "checkpoints": [asdict(k) for k in retention.kept],
            "corpus": corpus.version, "stopped_at": control.stopped_at}


def train_step(t: Training, mix: dict[str, float], retention: ckpt.Retention) -> None:
    """One update, its metrics, and the validation and checkpoint due at the step it reaches."""
    cfg = t.cfg
    lr = loop.learning_rate(t, mix, get_lr(cfg, t.step) * t.lr_scale)
    loss, grad_norm, extra, seconds = loop.timed(lambda: loop.update(t, mix))
    t.step += 1
    loop.log_step(t, lr, loss, grad_norm, seconds, extra, rss_bytes())
    loop.crash_if_asked(t)
    is_ckpt = t.step % cfg.ckpt_interval == 0 or t.step == cfg.max_steps
    if t.step % cfg.eval_interval == 0 or is_ckpt:
        t.last_val = loop.validate(t)
        t.run.log(t.last_val, step=t.step)
        t.log(f"step {t.step}: val loss {t.last_val['val/loss']:.4f}")
    if is_ckpt:
        loop.save_checkpoint(t, retention)


def resumed_config(cfg: TrainConfig) -> tuple[TrainConfig, dict[str, Any] | None, Path | None]:
    """With ``--resume``: the checkpoint's state, and its saved config under the per-invocation settings."""
    if not cfg.resume:
        return cfg, None, None
    path = Path(cfg.resume)
    state = ckpt.load(path / "runcast_state.pt" if path.is_dir() else path)
    return merge_resumed_config(cfg, state["config"]), state, path


def distributed(cfg: TrainConfig) -> tuple[int, int]:
    """Rank and world size (DeepSpeed picks its own ranks; only rank 0 broadcasts), every RNG seeded per rank."""
    rank, world_size = int(os.environ.get("RANK", "0")), int(os.environ.get("WORLD_SIZE", "1"))
    if cfg.deepspeed:
        from runcast.integrations.deepspeed import init_cpu_distributed

        init_cpu_distributed()
    random.seed(cfg.seed + rank)
    np.random.seed(cfg.seed + rank)
    torch.manual_seed(cfg.seed + rank)
    return rank, world_size


def build_data(cfg: TrainConfig, rank: int, log: Callable[[str], object]) -> tuple[Corpus, Sampler]:
    """The corpus (deduplicated, split) and this rank's batch sampler."""
    corpus = build_corpus(cfg.val_fraction, cfg.data_limit, min_tokens=cfg.block_size + 2)
    sampler = Sampler(corpus, cfg.batch_size, cfg.block_size, seed=cfg.seed + rank)
    log(
        f"data {corpus.version}: "
        + ", ".join(f"{n} {s.train.size:,} train / {s.val.size:,} val tokens" for n, s in corpus.sources.items())
        + f"; {corpus.duplicates_removed} exact duplicates removed"
    )
    return corpus, sampler


def build_model(cfg: TrainConfig, sampler: Sampler,
                log: Callable[[str], object]) -> tuple[GPT, Any, Any, int, Any, int]:
    """Model, optimizer (AdamW, or DeepSpeed's engine and its config), gradient accumulation steps and the
    number of parameters (counted before DeepSpeed partitions them)."""
    model = GPT(GPTConfig(cfg.n_layer, cfg.n_head, cfg.n_embd, cfg.block_size, 256, cfg.dropout))
    n_params = model.num_params()
    decay = [p for p in model.parameters() if p.dim() >= 2]  # matrices and embeddings
    no_decay = [p for p in model.parameters() if p.dim() < 2]  # biases and norms
    param_groups = [{"params": decay, "weight_decay": cfg.weight_decay}, {"params": no_decay, "weight_decay": 0.0}]
    engine, ds_config, accum = None, None, cfg.gradient_accumulation_steps
    if cfg.deepspeed:
        from runcast.integrations.deepspeed import initialize

        engine, optimizer, ds_config = initialize(model, param_groups, cfg)
        accum = engine.gradient_accumulation_steps()
        micro_batch = engine.train_micro_batch_size_per_gpu()
        if micro_batch != cfg.batch_size:
            sampler.batch_size = cfg.batch_size = micro_batch
    else:
        optimizer = torch.optim.AdamW(param_groups, lr=cfg.learning_rate, betas=(cfg.beta1, cfg.beta2))
    log(f"model: {n_params:,} parameters ({cfg.n_layer} layers, {cfg.n_embd} wide, "
        f"context {cfg.block_size})")
    return model, optimizer, engine, accum, ds_config, n_params


def restore(cfg: TrainConfig, state: dict[str, Any], path: Path, model: GPT, optimizer: Any, engine: Any,
            sampler: Sampler, log: Callable[[str], object]) -> int:
    """Model, optimizer, sampler and RNG state from the checkpoint; the step it was taken at."""
    if engine is not None:
        engine.load_checkpoint(str(path.parent), tag=path.name)
    else:
        model.load_state_dict(state["model"])
        optimizer.load_state_dict(state["optimizer"])
    sampler.load_state(state["sampler"])
    ckpt.set_rng_state(state["rng"])
    log(f"resumed from {cfg.resume} at step {state['step']}")
    return int(state["step"])


def announce_data(run: Any, corpus: Corpus, resume_state: dict[str, Any] | None, step: int,
                  log: Callable[[str], object]) -> None:
    """The dataset manifest, sent when it is new to the run (a fresh run, or data changed since the checkpoint)."""
    manifest_version = resume_state.get("manifest_version") if resume_state else None
    if corpus.version != manifest_version:
        if manifest_version:
            log(f"warning: the data changed since the checkpoint ({manifest_version} -> {corpus.version})")
        run.manifest(corpus.manifest(), version=corpus.version, step=step)


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
