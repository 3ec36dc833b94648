"""Broadcast a PyTorch Lightning run: ``Trainer(logger=RuncastLogger(project="p"))``.

Metric names pass through as logged (``self.log("train/loss", ...)``), except the
``ThroughputMonitor``'s, which are mapped onto Runcast's axes and detectors
(``train|items_per_sec`` -> ``tokens_per_s``, ``train|lengths`` -> ``tokens_seen``,
``train|samples_per_sec`` -> ``samples_per_s``, ``train|time`` -> ``time/elapsed``). A
metric is written once per step: a value logged again at a step already sent (a
``validate()`` after ``fit()`` at the same global step) is left out.

The run starts when Lightning hands over the model (``log_graph``, right after the
hyperparameters), on global rank zero only: its config is the hyperparameters as they
are (nested dicts stay nested) plus ``model.num_parameters``. Checkpoints written by
``ModelCheckpoint`` are reported at the step they were saved, each time they are written
(``last.ckpt`` is hashed when it is saved: later saves replace that file), and those it
deletes (``save_top_k``) are reported as pruned. The run stays open after ``fit()``, so
``validate()`` and ``test()`` afterwards are recorded; it finishes at process exit or with
``logger.finish()`` (as failed at once when Lightning reports a failure). A run passed in
is never finished by the logger.

``Trainer(callbacks=[RuncastCommands()])`` opts the run in to the team's commands
(docs/commands.md), taken after each optimizer step: ``stop`` saves a checkpoint and sets
``trainer.should_stop``, ``checkpoint`` saves one (``trainer.save_checkpoint``, reported to the
run), ``pause`` holds until ``resume``, ``set lr_scale`` scales the learning rate and its
schedule from the next step. With several ranks, global rank 0 decides and every rank acts at the same
step (``trainer.strategy.broadcast``).
"""

from __future__ import annotations

import os
import re
import time
from argparse import Namespace
from typing import TYPE_CHECKING, Any

from runcast.integrations._ranks import Decision, ObjectRanks, One, Ranks, boundary

from ._commands import StepCommands, follow, rescale
from ._common import parameter_count, plain, sha256_now, to_number

if TYPE_CHECKING:  # one package's names (the decorator where it is defined); at run time, either
    from lightning.fabric.loggers.logger import rank_zero_experiment
    from lightning.pytorch.callbacks import Callback
    from lightning.pytorch.loggers.logger import Logger
    from lightning.pytorch.utilities import rank_zero_only
else:
    try:
        from lightning.pytorch.callbacks import Callback
        from lightning.pytorch.loggers.logger import Logger, rank_zero_experiment
        from lightning.pytorch.utilities import rank_zero_only
    except ImportError:  # the standalone package name
        try:
            from pytorch_lightning.callbacks import Callback
            from pytorch_lightning.loggers.logger import Logger, rank_zero_experiment
            from pytorch_lightning.utilities import rank_zero_only
        except ImportError as exc:  # pragma: no cover - depends on the environment
            raise ImportError(
                "runcast.integrations.lightning needs PyTorch Lightning: pip install lightning"
            ) from exc

_STEP_IN_NAME = re.compile(r"step=(\d+)")
_THROUGHPUT = re.compile(r"^train[|/](items_per_sec|lengths|samples_per_sec|time)$")
_THROUGHPUT_NAMES = {
    "items_per_sec": "tokens_per_s",
    "lengths": "tokens_seen",
    "samples_per_sec": "samples_per_s",
    "time": "time/elapsed",
}


def map_key(key: str) -> str:
    """A Lightning metric name -> Runcast metric name (only the ThroughputMonitor's change)."""
    match = _THROUGHPUT.match(key)
    return _THROUGHPUT_NAMES[match.group(1)] if match else key


class RuncastLogger(Logger):
    """A Lightning logger that sends metrics, hyperparameters and checkpoints to Runcast.

    ``run``: an open ``runcast.Run`` to use (left open); without it, the script's open run
    (``runcast.run``, as W&B's logger takes ``wandb.run``; left open too), else one is started
    with ``project``, ``name`` and ``init_kwargs`` (server, token, seed, visibility, ...).
    """

    def __init__(self, project: str = "lightning", name: str = "lightning", run: Any = None, **init_kwargs: Any):
        super().__init__()
        self._project, self._name, self._init_kwargs = project, name, init_kwargs
        self._run = run
        self._owns_run = run is None
        self._config: dict[str, Any] = {}
        self._reported: dict[str, int] = {}  # checkpoint path -> step it was reported at
        self._written: dict[str, tuple[int, int, int]] = {}  # path -> (inode, size, mtime) when reported
        self._last_step = 0
        self._key_steps: dict[str, int] = {}

    @property
    def name(self) -> str:
        return self._name

    @property
    def version(self) -> str | None:
        return self._run.id if self._run is not None else None

    @property
    @rank_zero_experiment
    def experiment(self) -> Any:
        """The ``runcast.Run``; None until Lightning hands over the model.

        Lightning touches this during set-up, before it logs hyperparameters: starting the
        run here would lose them from the run's (write-once) config.
        """
        return self._run

    def _start(self) -> Any:
        if self._run is None:
            import runcast

            current = runcast.run
            if current is not None and not current.finished:  # the script's own run, as W&B's logger does
                self._run, self._owns_run = current, False
                if self._config:
                    current.config.update(self._config)
            else:
                self._run = runcast.init(project=self._project, name=self._name, config=self._config,
                                         **self._init_kwargs)
        return self._run

    @rank_zero_only
    def log_hyperparams(self, params: dict[str, Any] | Namespace, *args: Any, **kwargs: Any) -> None:
        params = plain(params or {})
        if self._run is None:  # before the run starts: becomes its config
            self._config.update(params)
        elif params and any(self._config.get(k) != v for k, v in params.items()):
            self._config.update(params)
            self._run.note("hyperparameters: " + ", ".join(f"{k}={v}" for k, v in params.items())[:9000])

    @rank_zero_only
    def log_graph(self, model: Any, input_array: Any = None) -> None:
        """Lightning calls this right after ``log_hyperparams``: the parameter count joins the config."""
        if self._run is None:
            count = parameter_count(model)
            if count is not None:
                model_info = self._config.get("model")
                if isinstance(model_info, dict):
                    model_info["num_parameters"] = count
                elif "model" not in self._config:
                    self._config["model"] = {"num_parameters": count}
        self._start()

    @rank_zero_only
    def log_metrics(self, metrics: dict[str, Any], step: int | None = None) -> None:
        if step is not None:
            self._last_step = step
        at = step if step is not None else self._last_step
        values: dict[str, float] = {}
        for key, value in metrics.items():
            number = to_number(value)
            name = map_key(key)
            if number is None or self._key_steps.get(name, -1) >= at:
                continue
            self._key_steps[name] = at
            values[name] = number
        if values:
            self._start().log(values, step=at)

    @rank_zero_only
    def after_save_checkpoint(self, checkpoint_callback: Any) -> None:
        """Report every checkpoint file (re)written by this save, at the step it was saved."""
        scores = getattr(checkpoint_callback, "best_k_models", {}) or {}
        paths = set(scores)
        last = getattr(checkpoint_callback, "last_model_path", "") or ""
        if last:
            paths.add(last)
        monitor = getattr(checkpoint_callback, "monitor", None)
        for path in sorted(paths):
            written = _written(path)
            if written is None or self._written.get(path) == written:
                continue  # gone, or reported as it is now
            match = _STEP_IN_NAME.search(os.path.basename(path))
            saved_at = getattr(checkpoint_callback, "_last_global_step_saved", None)  # the trainer's global step
            step = int(match.group(1)) if match else saved_at if isinstance(saved_at, int) else self._last_step
            score = to_number(scores.get(path))
            metrics = {monitor: score} if monitor and score is not None else {}
            rewritten = path == last and not match  # a fixed name: the next save replaces this file
            digest = sha256_now(path) if rewritten and not os.path.islink(path) else None
            self._start().checkpoint(path, step=step, metrics=metrics, sha256=digest)
            self._reported[path] = step
            self._written[path] = written
        self._sweep()

    def _sweep(self) -> None:
        """Report as pruned the checkpoints ModelCheckpoint deleted (it deletes after this hook runs)."""
        for path, step in list(self._reported.items()):
            if not os.path.lexists(path):
                self._start().checkpoint(path, step=step, status="pruned")
                del self._reported[path]
                self._written.pop(path, None)

    @rank_zero_only
    def finalize(self, status: str) -> None:
        """End of fit / validate / test: the run stays open for the next one, unless training failed."""
        if self._run is not None:
            self._sweep()
        if status == "failed":
            self.finish("failed")

    def finish(self, status: str = "finished") -> None:
        """Finish the run this logger started (a run passed in is left open)."""
        if self._owns_run and self._run is not None:
            self._run.finish(status)


class RuncastCommands(Callback):
    """Take the team's commands after each optimizer step (``Trainer(callbacks=[RuncastCommands()])``).

    ``run``: the run to take them for; default the ``RuncastLogger``'s among the Trainer's loggers,
    else the script's open run (``runcast.run``). ``dirpath``: where commanded checkpoints go
    (default the ``ModelCheckpoint``'s folder, else ``default_root_dir/checkpoints``).
    """

    def __init__(self, run: Any = None, dirpath: str | None = None) -> None:
        super().__init__()
        self.run, self.dirpath = run, dirpath
        self._commands: StepCommands | None = None  # global rank 0's
        self._ranks: Ranks | None = None  # every rank's, when the run takes commands
        self._scale = 1.0  # the learning-rate scale in force (restored from a checkpoint)
        self._acted_at = -1  # the global step of the last boundary acted at

    def state_dict(self) -> dict[str, Any]:
        """Kept in Lightning's checkpoints: a resumed fit goes on with the learning-rate scale in force."""
        return {"lr_scale": self._scale}

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        self._scale = float(state_dict.get("lr_scale", 1.0))

    def on_train_start(self, trainer: Any, pl_module: Any) -> None:
        self._commands, self._ranks, self._acted_at = None, None, trainer.global_step
        commands = None
        if trainer.global_rank == 0:
            run = self.run or next((lg._start() for lg in trainer.loggers if isinstance(lg, RuncastLogger)), None)
            if run is None:
                import runcast

                run = runcast.run if runcast.run is not None and not runcast.run.finished else None
            if run is None:
                raise RuntimeError("RuncastCommands needs a run: pass run=, add a RuncastLogger, or call runcast.init()")
            self.run = run
            commands = StepCommands(run, lr_scale=self._scale)
        ranks: Ranks = One() if trainer.world_size == 1 else ObjectRanks(
            lambda obj: trainer.strategy.broadcast(obj, src=0))
        if ranks.flag(commands is not None and commands.active):  # every rank opts in, or none
            self._commands, self._ranks = commands, ranks

    def on_train_batch_end(self, trainer: Any, pl_module: Any, outputs: Any, batch: Any, batch_idx: int) -> None:
        commands, step = self._commands, trainer.global_step
        if self._ranks is None or step == self._acted_at:
            return  # a batch that accumulated gradients: no optimizer step since the last boundary
        self._acted_at = step

        def apply(decision: Decision) -> None:
            if decision.lr_ratio is not None:
                rescale(trainer.optimizers, [c.scheduler for c in trainer.lr_scheduler_configs], decision.lr_ratio)
            if decision.lr_scale is not None:
                self._scale = decision.lr_scale
            if commands is None:
                follow(decision.values)
            if decision.save:
                self._save(trainer, step)
            if decision.stop:
                trainer.should_stop = True

        boundary(self._ranks, (lambda: commands.decide(step)) if commands is not None else None, apply,
                 commands.sleep if commands is not None else time.sleep)

    def on_train_end(self, trainer: Any, pl_module: Any) -> None:
        if self._commands is not None:
            self._commands.close(trainer.global_step)

    def _save(self, trainer: Any, step: int) -> None:
        """Every rank: the strategy's save (global rank 0 writes); rank 0 reports it and acknowledges."""
        folder = self.dirpath or getattr(trainer.checkpoint_callback, "dirpath", None) or os.path.join(
            trainer.default_root_dir, "checkpoints")
        path = os.path.join(folder, f"commanded-step={step}.ckpt")
        trainer.save_checkpoint(path)
        if self._commands is not None:
            self.run.checkpoint(path, step=step)
            self._commands.saved(step, path)


def _written(path: str) -> tuple[int, int, int] | None:
    """What tells one write of ``path`` from the next: (inode, size, mtime in ns) of the file it names."""
    try:
        info = os.stat(path)
    except OSError:
        return None
    return info.st_ino, info.st_size, info.st_mtime_ns
