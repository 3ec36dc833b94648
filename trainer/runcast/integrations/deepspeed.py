"""DeepSpeed helpers: read what an engine knows (loss scale, lr, grad norm, skipped steps),
and set DeepSpeed up on a machine without a GPU.

    from runcast.integrations.deepspeed import engine_metrics
    engine.backward(loss); engine.step()
    if engine.is_gradient_accumulation_boundary():   # before step(); or check global_steps
        ...
    run.log({"train/loss": loss.item(), **engine_metrics(engine)}, step=engine.global_steps)
"""

from __future__ import annotations

import json
import os
import socket
from pathlib import Path
from typing import Any

EXTENSIONS_DIR = Path.home() / ".cache" / "runcast-torch-extensions"


def _deepspeed():
    try:
        import deepspeed
    except ImportError as exc:  # pragma: no cover - depends on the environment
        raise ImportError(
            "DeepSpeed support needs the deepspeed package: pip install 'runcast[deepspeed]'"
        ) from exc
    return deepspeed


def _number(value: Any) -> float | None:
    if value is None:
        return None
    if hasattr(value, "item"):
        value = value.item()
    try:
        value = float(value)
    except (TypeError, ValueError):
        return None
    return value


def engine_metrics(engine: Any) -> dict[str, float]:
    """The optimizer's view of the last step, as Runcast metrics.

    ``lr`` (first param group), ``grad_norm`` (global norm before clipping, when the
    engine computed one), ``skipped_steps`` (steps skipped on fp16 overflow) and
    ``loss_scale`` (only when fp16 dynamic loss scaling is on: bf16 and fp32 have none).
    """
    out: dict[str, float] = {}
    try:
        lrs = engine.get_lr()
        if lrs:
            out["lr"] = float(lrs[0])
    except (AttributeError, IndexError, TypeError):
        pass
    norm = _number(getattr(engine, "get_global_grad_norm", lambda: None)())
    if norm is not None:  # None before the first step, or when the engine did not compute it
        out["grad_norm"] = norm
    out["skipped_steps"] = float(getattr(engine, "skipped_steps", 0))
    fp16 = getattr(engine, "fp16_enabled", lambda: False)()
    if fp16:
        optimizer = getattr(engine, "optimizer", None)
        scale = _number(getattr(optimizer, "cur_scale", None) or getattr(optimizer, "loss_scale", None))
        if scale is not None:
            out["loss_scale"] = scale
    return out


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def init_cpu_distributed() -> None:
    """Initialise torch.distributed for DeepSpeed; outside a launcher, as a one-process world.

    Sets MASTER_ADDR/MASTER_PORT/RANK/LOCAL_RANK/WORLD_SIZE when a launcher did not
    (without them DeepSpeed looks for MPI), uses gloo on a machine without CUDA, and
    keeps compiled ops in ``~/.cache/runcast-torch-extensions`` unless
    TORCH_EXTENSIONS_DIR says otherwise (the first process compiles a comm op, ~1-2 min).
    """
    os.environ.setdefault("TORCH_EXTENSIONS_DIR", str(EXTENSIONS_DIR))
    if "RANK" not in os.environ:
        os.environ.update(RANK="0", LOCAL_RANK="0", WORLD_SIZE="1")
        os.environ.setdefault("MASTER_ADDR", "127.0.0.1")
        os.environ.setdefault("MASTER_PORT", str(_free_port()))
    import torch

    deepspeed = _deepspeed()
    deepspeed.init_distributed(dist_backend="nccl" if torch.cuda.is_available() else "gloo")


def load_config(path: str | os.PathLike[str], batch_size: int, accumulation: int, grad_clip: float) -> dict[str, Any]:
    """Read a ds_config.json; fill micro-batch, accumulation and clipping where it leaves them out or "auto"."""
    config = json.loads(Path(path).read_text())
    for key, value in (
        ("train_micro_batch_size_per_gpu", batch_size),
        ("gradient_accumulation_steps", accumulation),
        ("gradient_clipping", grad_clip),
    ):
        if config.get(key, "auto") == "auto":
            config[key] = value
    if config.get("train_batch_size") == "auto":
        del config["train_batch_size"]
    return config


def initialize(model: Any, param_groups: list[dict[str, Any]], cfg: Any) -> tuple[Any, Any, dict[str, Any]]:
    """``deepspeed.initialize`` for the reference trainer: returns (engine, optimizer, config).

    The optimizer comes from the config when it names one (e.g. Adam with torch_adam on
    the CPU); otherwise a torch AdamW with the trainer's settings is handed to DeepSpeed.
    """
    import torch

    deepspeed = _deepspeed()
    config = load_config(cfg.deepspeed, cfg.batch_size, cfg.gradient_accumulation_steps, cfg.grad_clip)
    optimizer = None
    if "optimizer" not in config:
        optimizer = torch.optim.AdamW(param_groups, lr=cfg.learning_rate, betas=(cfg.beta1, cfg.beta2))
    engine, optimizer, _, _ = deepspeed.initialize(
        model=model,
        optimizer=optimizer,
        model_parameters=param_groups if optimizer is None else None,
        config=config,
    )
    return engine, optimizer, config
