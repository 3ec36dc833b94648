"""DeepSpeed helpers: read what an engine knows (loss scale, lr, grad norm, skipped steps),
forward the engine's own monitor values to a run, and set DeepSpeed up on a machine
without a GPU.

    from runcast.integrations.deepspeed import engine_metrics, watch_monitor
    watch_monitor(engine, run)        # lr, loss scale, timings, pipeline losses, as DeepSpeed reports them
    engine.backward(loss); engine.step()
    run.log({"train/loss": loss.item(), **engine_metrics(engine, monitored=True)}, step=engine.global_steps)
"""

from __future__ import annotations

import importlib
import json
import os
import socket
from pathlib import Path
from types import ModuleType
from typing import Any

EXTENSIONS_DIR = Path.home() / ".cache" / "runcast-torch-extensions"


def _deepspeed() -> ModuleType:
    try:
        return importlib.import_module("deepspeed")
    except ImportError as exc:  # pragma: no cover - depends on the environment
        raise ImportError(
            "DeepSpeed support needs the deepspeed package: pip install 'runcast[deepspeed]'"
        ) from exc


def _number(value: Any) -> float | None:
    if value is None:
        return None
    if hasattr(value, "item"):
        value = value.item()
    try:
        return float(value)
    except (TypeError, ValueError):
        return None


def engine_metrics(engine: Any, monitored: bool = False) -> dict[str, float]:
    """The optimizer's view of the last step, as Runcast metrics.

    ``lr`` (first param group), ``grad_norm`` (global norm before clipping, when the
    engine computed one), ``skipped_steps`` (steps skipped on fp16 overflow) and
    ``loss_scale`` (only when fp16 dynamic loss scaling is on: bf16 and fp32 have none).
    ``monitored=True`` leaves out what ``watch_monitor`` already sends (lr, loss scale).
    """
    out: dict[str, float] = {}
    try:
        lrs = engine.get_lr()
        if lrs and not monitored:
            out["lr"] = float(lrs[0])
    except (AttributeError, IndexError, TypeError):
        pass
    norm = _number(getattr(engine, "get_global_grad_norm", lambda: None)())
    if norm is not None:  # None before the first step, or when the engine did not compute it
        out["grad_norm"] = norm
    out["skipped_steps"] = float(getattr(engine, "skipped_steps", 0))
    fp16 = getattr(engine, "fp16_enabled", lambda: False)()
    if fp16 and not monitored:
        optimizer = getattr(engine, "optimizer", None)
        scale = _number(getattr(optimizer, "cur_scale", None) or getattr(optimizer, "loss_scale", None))
        if scale is not None:
            out["loss_scale"] = scale
    return out


_MONITOR_NAMES = {
    "lr": "lr",
    "loss_scale": "loss_scale",
    "train_loss": "train/loss",
    "eval_loss": "eval/loss",
}


def monitor_key(name: str) -> str:
    """A DeepSpeed monitor event name (``Train/Samples/lr``) -> Runcast metric name.

    ``lr``, ``loss_scale``, ``train_loss`` and ``eval_loss`` (pipeline engines) become
    ``lr``, ``loss_scale``, ``train/loss`` and ``eval/loss``; the wall-clock breakdown
    ``elapsed_time_ms_<part>`` becomes ``time/<part>_ms``; anything else
    ``deepspeed/<name>``.
    """
    last = name.rsplit("/", 1)[-1]
    if last in _MONITOR_NAMES:
        return _MONITOR_NAMES[last]
    if last.startswith("elapsed_time_ms_"):
        return f"time/{last.removeprefix('elapsed_time_ms_')}_ms"
    return "deepspeed/" + last


class RuncastMonitor:
    """Stands in for ``engine.monitor``: what the engine writes goes to the run, then to the monitors
    the DeepSpeed config enabled (TensorBoard, CSV, W&B, Comet), as before.

    Each ``write_events`` call becomes one ``run.log`` at the engine's ``global_steps``,
    with ``samples_seen`` (the engine's sample count, DeepSpeed's own x axis). A key is
    written once per step.
    """

    def __init__(self, engine: Any, run: Any) -> None:
        self._engine, self._run = engine, run
        self._inner = engine.monitor
        self.enabled = True  # makes the engine write its events
        self._sent: dict[str, int] = {}

    def write_events(self, event_list: list[tuple[str, Any, int]]) -> None:
        step = int(getattr(self._engine, "global_steps", 0))
        values: dict[str, float] = {}
        samples = None
        for name, value, x in event_list:
            number = _number(value)
            key = monitor_key(name)
            if number is None or self._sent.get(key, -1) >= step:
                continue
            values[key] = number
            samples = x
        if values:
            if samples is not None and self._sent.get("samples_seen", -1) < step:
                values["samples_seen"] = float(samples)
            self._sent.update(dict.fromkeys(values, step))
            self._run.log(values, step=step)
        if getattr(self._inner, "enabled", False):
            self._inner.write_events(event_list)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)


def watch_monitor(engine: Any, run: Any) -> RuncastMonitor:
    """Send what the engine reports to its monitor (``engine.monitor.write_events``) to ``run``.

    DeepSpeed writes these on global rank 0 at each optimizer step: ``lr``, ``loss_scale``
    (fp16), the wall-clock breakdown when ``wall_clock_breakdown`` is on, and a pipeline
    engine's ``train/loss`` and ``eval/loss``. The monitors the config enabled keep
    receiving them. Returns the installed monitor.
    """
    monitor = engine.monitor if isinstance(engine.monitor, RuncastMonitor) else RuncastMonitor(engine, run)
    engine.monitor = monitor
    return monitor


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]  # (host, port) of an AF_INET socket
        return port


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
    config: dict[str, Any] = json.loads(Path(path).read_text())
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
