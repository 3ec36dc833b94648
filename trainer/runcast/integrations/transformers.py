"""Broadcast a Hugging Face ``Trainer`` run: ``Trainer(..., callbacks=[RuncastCallback(project="p")])``.

Works on the world's process zero only (other ranks do nothing). Keys are mapped to
Runcast's conventions: ``loss`` -> ``train/loss``, ``eval_loss`` -> ``eval/loss``,
``learning_rate`` -> ``lr``, ``grad_norm`` stays, the final ``train_loss`` (a mean over
the run) -> ``train/mean_loss``; a key is sent once per step; numbers and one-element tensors are
kept, anything else is skipped with one warning per key. Checkpoints the Trainer saves
are reported (and reported as pruned when ``save_total_limit`` rotates them away).
A resumed Trainer (``resume_from_checkpoint``) continues the same Runcast run in a new
segment: the run id is stored in each checkpoint folder as ``runcast.json``. The
callback finishes only a run it started; a run passed in stays open.
"""

from __future__ import annotations

import json
import logging
import os
from pathlib import Path
from typing import Any

try:
    from transformers import TrainerCallback
except ImportError as exc:  # pragma: no cover - depends on the environment
    raise ImportError(
        "runcast.integrations.transformers needs the transformers package: pip install transformers accelerate"
    ) from exc

log = logging.getLogger("runcast")
RUN_FILE = "runcast.json"


def map_key(key: str) -> str:
    """Trainer log key -> Runcast metric name."""
    if key in ("learning_rate", "lr"):
        return "lr"
    if key == "grad_norm":
        return "grad_norm"
    if key == "train_loss":  # the end-of-training summary: the mean over all steps
        return "train/mean_loss"
    for prefix in ("eval", "test", "predict"):
        if key.startswith(prefix + "_"):
            return f"{prefix}/{key[len(prefix) + 1 :]}"
    if key.startswith("train_"):
        return "train/" + key[len("train_") :]
    return key if "/" in key else "train/" + key


def to_number(value: Any) -> float | None:
    """A float from a number or a one-element tensor / array; None for anything else."""
    if isinstance(value, bool):
        return None
    if isinstance(value, (int, float)):
        return float(value)
    numel = getattr(value, "numel", None) or getattr(value, "size", None)
    try:
        if (numel() if callable(numel) else numel) == 1:
            return float(value.item())
    except (TypeError, ValueError, AttributeError):
        pass
    return None


class RuncastCallback(TrainerCallback):
    """Send the Trainer's logs, evaluations and checkpoints to Runcast.

    ``run``: an open ``runcast.Run`` to log into (left open at the end). Otherwise one
    is started at train begin with ``project``, ``name`` and ``init_kwargs`` (server,
    token, visibility, ...; RUNCAST_SERVER / RUNCAST_TOKEN apply), its config being the
    TrainingArguments and the model config.
    """

    def __init__(self, project: str = "huggingface", name: str | None = None, run: Any = None, **init_kwargs: Any):
        self.project, self.name, self.init_kwargs = project, name, init_kwargs
        self.run = run
        self._owns_run = False
        self._warned: set[str] = set()
        self._reported: set[str] = set()
        self._last_step: dict[str, int] = {}

    # -- lifecycle -------------------------------------------------------------------------

    def on_train_begin(self, args, state, control, model=None, **kwargs):
        if not state.is_world_process_zero or self.run is not None:
            return
        import runcast

        config: dict[str, Any] = {"training_args": args.to_sanitized_dict()}
        model_config = getattr(model, "config", None)
        if model_config is not None and hasattr(model_config, "to_diff_dict"):
            config["model"] = model_config.to_diff_dict()
        resume: dict[str, Any] = {}
        saved = Path(args.output_dir) / f"checkpoint-{state.global_step}" / RUN_FILE
        if state.global_step > 0 and saved.exists():  # resumed from a checkpoint we reported
            resume = {"resume": json.loads(saved.read_text())["run"], "resume_step": state.global_step}
        self.run = runcast.init(
            project=self.project,
            name=self.name or args.run_name or os.path.basename(os.path.normpath(args.output_dir)),
            config=config,
            seed=args.seed,
            **resume,
            **self.init_kwargs,
        )
        self._owns_run = True

    def on_train_end(self, args, state, control, **kwargs):
        if self._owns_run and self.run is not None:
            self.run.finish("finished")
            self.run, self._owns_run = None, False

    # -- metrics -----------------------------------------------------------------------------

    def on_log(self, args, state, control, logs=None, **kwargs):
        if not state.is_world_process_zero or self.run is None or not logs:
            return
        values: dict[str, float] = {}
        for key, value in logs.items():
            number = to_number(value)
            if number is None:
                if key not in self._warned:
                    self._warned.add(key)
                    log.warning("runcast: not logging %r: %s is not a number", key, type(value).__name__)
                continue
            name = map_key(key)
            # "epoch" comes with the train and the eval logs of one step: a metric is written once per step
            if self._last_step.get(name, -1) >= state.global_step:
                continue
            self._last_step[name] = state.global_step
            values[name] = number
        if values:
            self.run.log(values, step=state.global_step)

    # -- checkpoints -------------------------------------------------------------------------

    def on_save(self, args, state, control, **kwargs):
        if not state.is_world_process_zero or self.run is None:
            return
        folder = Path(args.output_dir) / f"checkpoint-{state.global_step}"
        if folder.is_dir():
            (folder / RUN_FILE).write_text(json.dumps({"run": self.run.id, "step": state.global_step}))
            metrics = {}
            if state.best_metric is not None and args.metric_for_best_model:
                metrics[map_key("eval_" + args.metric_for_best_model.removeprefix("eval_"))] = state.best_metric
            self.run.checkpoint(folder, step=state.global_step, metrics=metrics)
            self._reported.add(str(folder))
        for path in sorted(self._reported):  # save_total_limit deletes old ones before on_save
            if not os.path.exists(path):
                step = int(path.rsplit("-", 1)[-1])
                self.run.checkpoint(path, step=step, status="pruned")
                self._reported.discard(path)
