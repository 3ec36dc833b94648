"""Broadcast a PyTorch Lightning run: ``Trainer(logger=RuncastLogger(project="p"))``.

Metric names pass through as logged (``self.log("train/loss", ...)``). The run starts
lazily on the first hyperparameters or metrics, on global rank zero only (Lightning
calls loggers there). Checkpoints written by ``ModelCheckpoint`` are reported, and
those it deletes (``save_top_k``) are reported as pruned. ``finalize`` ends the run
with Lightning's status, unless the run was passed in (then it stays open).
"""

from __future__ import annotations

import os
import re
from argparse import Namespace
from typing import Any

try:
    from lightning.pytorch.loggers.logger import Logger, rank_zero_experiment
    from lightning.pytorch.utilities import rank_zero_only
except ImportError:  # the standalone package name
    try:
        from pytorch_lightning.loggers.logger import Logger, rank_zero_experiment
        from pytorch_lightning.utilities import rank_zero_only
    except ImportError as exc:  # pragma: no cover - depends on the environment
        raise ImportError(
            "runcast.integrations.lightning needs PyTorch Lightning: pip install lightning"
        ) from exc

_STEP_IN_NAME = re.compile(r"step=(\d+)")


def _number(value: Any) -> float | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, (int, float)):
        return float(value)
    try:
        return float(value.item()) if value.numel() == 1 else None
    except (AttributeError, TypeError, ValueError):
        return None


class RuncastLogger(Logger):
    """A Lightning logger that sends metrics, hyperparameters and checkpoints to Runcast.

    ``run``: an open ``runcast.Run`` to use (left open). Otherwise one is started with
    ``project``, ``name`` and ``init_kwargs`` (server, token, seed, visibility, ...).
    """

    def __init__(self, project: str = "lightning", name: str = "lightning", run: Any = None, **init_kwargs: Any):
        super().__init__()
        self._project, self._name, self._init_kwargs = project, name, init_kwargs
        self._run = run
        self._owns_run = run is None
        self._config: dict[str, Any] = {}
        self._reported: dict[str, int] = {}
        self._last_step = 0

    @property
    def name(self) -> str:
        return self._name

    @property
    def version(self) -> str | None:
        return self._run.id if self._run is not None else None

    @property
    @rank_zero_experiment
    def experiment(self) -> Any:
        """The ``runcast.Run``; None until the first hyperparameters or metrics arrive.

        Lightning touches this during set-up, before it logs hyperparameters: starting the
        run here would lose them from the run's (write-once) config.
        """
        return self._run

    def _start(self) -> Any:
        if self._run is None:
            import runcast

            self._run = runcast.init(project=self._project, name=self._name, config=self._config, **self._init_kwargs)
        return self._run

    @rank_zero_only
    def log_hyperparams(self, params: dict[str, Any] | Namespace, *args: Any, **kwargs: Any) -> None:
        params = vars(params) if isinstance(params, Namespace) else dict(params or {})
        if self._run is None:  # before the run starts: becomes its config
            self._config.update({k: v if isinstance(v, (int, float, str, bool, type(None))) else str(v)
                                 for k, v in params.items()})
            self._start()
        elif params:
            self._run.note("hyperparameters: " + ", ".join(f"{k}={v}" for k, v in params.items())[:9000])

    @rank_zero_only
    def log_metrics(self, metrics: dict[str, Any], step: int | None = None) -> None:
        values = {k: v for k, v in ((k, _number(v)) for k, v in metrics.items()) if v is not None}
        if step is not None:
            self._last_step = step
        if values:
            self._start().log(values, step=step)

    @rank_zero_only
    def after_save_checkpoint(self, checkpoint_callback: Any) -> None:
        paths = set(getattr(checkpoint_callback, "best_k_models", {}) or {})
        last = getattr(checkpoint_callback, "last_model_path", "") or ""
        if last:
            paths.add(last)
        for path in sorted(paths - set(self._reported)):
            if os.path.exists(path):
                match = _STEP_IN_NAME.search(os.path.basename(path))
                step = int(match.group(1)) if match else self._last_step
                score = checkpoint_callback.best_k_models.get(path) if hasattr(checkpoint_callback, "best_k_models") else None
                monitor = getattr(checkpoint_callback, "monitor", None)
                metrics = {monitor: _number(score)} if monitor and _number(score) is not None else {}
                self._start().checkpoint(path, step=step, metrics=metrics)
                self._reported[path] = step
        self._sweep()

    def _sweep(self) -> None:
        """Report as pruned the checkpoints ModelCheckpoint deleted (it deletes after this hook runs)."""
        for path, step in list(self._reported.items()):
            if not os.path.exists(path):
                self._start().checkpoint(path, step=step, status="pruned")
                del self._reported[path]

    @rank_zero_only
    def finalize(self, status: str) -> None:
        if self._run is not None:
            self._sweep()
        if self._owns_run and self._run is not None:
            self._run.finish({"success": "finished", "failed": "failed"}.get(status, "finished"))
