"""Broadcast a Hugging Face ``Trainer`` run: ``Trainer(..., callbacks=[RuncastCallback(project="p")])``.

Works on the world's process zero only (other ranks do nothing and print nothing).
Keys are mapped onto Runcast's conventions (``map_key``): ``loss`` -> ``train/loss``,
``eval_loss`` -> ``eval/loss``, ``learning_rate`` -> ``lr``, ``grad_norm`` stays,
``num_input_tokens_seen`` -> ``tokens_seen`` (the tokens x axis), the running
``train_runtime`` -> ``time/elapsed`` (the wall-time x axis), and the throughput over the
last logging interval -> ``tokens_per_s`` (the throughput panel and detector). The
figures of the end of training (``train_runtime``, ``total_flos``, the mean
``train_loss``, ...) go to the run's summary, not into one-point series. The model's
parameter count is in the config (``model.num_parameters``: the memory estimate).

A key is sent once per step; numbers and one-element tensors are kept, anything else is
skipped with one warning per key. Checkpoints the Trainer saves are reported (and
reported as pruned when ``save_total_limit`` rotates them away). A resumed Trainer
(``resume_from_checkpoint``) continues the same Runcast run in a new segment: the run
id is stored in each checkpoint folder as ``runcast.json``.

``sample_prompts=[...]`` (opt-in): at each evaluation the model generates a continuation of
each prompt (``generation_kwargs``, default greedy, 64 new tokens; the Trainer's
``processing_class`` as the tokenizer unless ``tokenizer`` is given), logged with
``run.log_samples`` at the global step, on the world's process zero only
(``integrations.generation``; not for a model sharded across processes).

The run stays open after ``train()``, so ``trainer.evaluate()`` afterwards is recorded;
it finishes at process exit, at the next ``train()`` of this callback, or with
``callback.finish()``. A run passed in is never finished by the callback.
"""

from __future__ import annotations

import json
import logging
import os
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from runcast.integrations._ranks import Decision, Ranks, boundary, torch_ranks

from ._commands import StepCommands, follow, rescale
from ._common import parameter_count, plain, set_summary, to_number
from .generation import DEFAULT_SETTINGS, generate_samples, sharded

try:
    from transformers import TrainerCallback
except ImportError as exc:  # pragma: no cover - depends on the environment
    raise ImportError(
        "runcast.integrations.transformers needs the transformers package: pip install transformers accelerate"
    ) from exc

log = logging.getLogger("runcast")
RUN_FILE = "runcast.json"
END_OF_TRAINING = "total_flos"  # only the Trainer's final log carries it
_RENAMED = {
    "learning_rate": "lr",
    "lr": "lr",
    "grad_norm": "grad_norm",
    "num_input_tokens_seen": "tokens_seen",
    "train_runtime": "time/elapsed",
    "train_tokens_per_second": "tokens_per_s",
}

__all__ = ["RuncastCallback", "map_key", "summary_key", "to_number", "training_args"]


def map_key(key: str) -> str:
    """A key of a Trainer log during training -> Runcast metric name."""
    if key in _RENAMED:
        return _RENAMED[key]
    for prefix in ("eval", "test", "predict"):
        if key.startswith(prefix + "_"):
            return f"{prefix}/{key[len(prefix) + 1 :]}"
    if key.startswith("train_"):
        return "train/" + key[len("train_") :]
    return key if "/" in key else "train/" + key


def training_args(args: Any) -> dict[str, Any]:
    """TrainingArguments as JSON types (None as null, lists as lists), tokens masked, as W&B's integration
    stores them; ``to_sanitized_dict`` (TensorBoard's) would make "None" and "['labels']" strings."""
    values: dict[str, Any] = plain(args.to_dict())
    for name in ("train_batch_size", "eval_batch_size"):  # derived per device count, as to_sanitized_dict adds them
        values[name] = plain(getattr(args, name, None))
    return values


def summary_key(key: str) -> str:
    """A key of the Trainer's end-of-training log -> summary name (``train_loss`` is a mean)."""
    if key == "train_loss":
        return "train/mean_loss"
    if key.startswith("train_"):
        return "train/" + key[len("train_") :]
    return key if "/" in key else "train/" + key


class RuncastCallback(TrainerCallback):
    """Send the Trainer's logs, evaluations and checkpoints to Runcast.

    ``run``: an open ``runcast.Run`` to log into (left open). Otherwise the script's open run
    (``runcast.run``, as W&B's callback takes ``wandb.run``; left open too, the Trainer's
    arguments and model config added to its config), else one is started at train begin with ``project``, ``name`` and ``init_kwargs`` (server, token,
    visibility, ...; RUNCAST_SERVER / RUNCAST_TOKEN apply), its config being the
    TrainingArguments and the model config with its parameter count.

    ``sample_prompts``: prompts the model continues at each evaluation, logged as samples
    (``samples_key``) with ``generation_kwargs`` (default ``{"max_new_tokens": 64,
    "do_sample": False}``) and ``tokenizer`` (default: the Trainer's ``processing_class``).

    ``commands=True``: take the team's commands after each optimizer step (docs/commands.md):
    ``stop`` saves a checkpoint and ends ``train()``, ``checkpoint`` saves one, ``pause`` holds
    until ``resume``, ``set lr_scale`` scales the learning rate and its schedule from the next
    step. With several ranks, rank 0 decides and every rank acts at the same step (a broadcast over the
    Trainer's ``torch.distributed`` group).
    """

    def __init__(self, project: str = "huggingface", name: str | None = None, run: Any = None, *,
                 sample_prompts: Sequence[str] = (), generation_kwargs: Mapping[str, Any] | None = None,
                 tokenizer: Any = None, samples_key: str = "samples", commands: bool = False, **init_kwargs: Any):
        if isinstance(sample_prompts, str) or not all(isinstance(p, str) for p in sample_prompts):
            raise TypeError("sample_prompts must be a list of strings")
        self.project, self.name, self.init_kwargs = project, name, init_kwargs
        self.sample_prompts = list(sample_prompts)
        self.generation_kwargs = dict(DEFAULT_SETTINGS if generation_kwargs is None else generation_kwargs)
        self.tokenizer, self.samples_key = tokenizer, samples_key
        self.run = run
        self._owns_run = False
        self._warned: set[str] = set()
        self._reported: set[str] = set()
        self._last_step: dict[str, int] = {}
        self._tokens_at: tuple[float, float] | None = None  # (tokens seen, train_runtime) at the last log
        self.commands = commands
        self._commands: StepCommands | None = None  # rank 0's
        self._ranks: Ranks | None = None  # every rank's, when the run takes commands
        self._held = False  # the last decision holds (paused): go on holding after the save it asked for

    # -- lifecycle -------------------------------------------------------------------------

    def on_train_begin(self, args: Any, state: Any, control: Any, model: Any = None, **kwargs: Any) -> None:
        if state.is_world_process_zero:
            self._open(args, state, model)
        self._commands, self._ranks, self._held = None, None, False
        if self.commands:
            self._take_commands(args, state)

    def _take_commands(self, args: Any, state: Any) -> None:
        """Opt in on every rank, when rank 0's run takes commands (a collective: every rank calls it)."""
        ranks = torch_ranks(args.world_size)
        if ranks is None:
            log.warning("runcast: %d ranks and no torch.distributed process group: this run does not take "
                        "the team's commands", args.world_size)
            return
        commands = None
        if state.is_world_process_zero and self.run is not None:
            saved = Path(args.output_dir) / f"checkpoint-{state.global_step}" / RUN_FILE
            scale = json.loads(saved.read_text()).get("lr_scale", 1.0) if state.global_step and saved.exists() else 1.0
            commands = StepCommands(self.run, lr_scale=float(scale))
        if ranks.flag(commands is not None and commands.active):
            self._commands, self._ranks = commands, ranks

    def _open(self, args: Any, state: Any, model: Any) -> None:
        if self.run is not None and not self._owns_run:
            return
        self.finish()  # a run this callback opened for an earlier train()
        import runcast

        model_config: dict[str, Any] = {}
        if hasattr(getattr(model, "config", None), "to_diff_dict"):
            model_config = plain(model.config.to_diff_dict())
        count = parameter_count(model)
        if count is not None:
            model_config["num_parameters"] = count
        config: dict[str, Any] = {"training_args": training_args(args), "model": model_config}
        current = runcast.run
        if current is not None and not current.finished:
            # W&B's habit: the run the script opened with init() is the one the Trainer logs to
            # (and stays the script's to finish); the Trainer's arguments join its config.
            self.run, self._owns_run = current, False
            current.config.update(config)
            self._last_step.clear()
            self._tokens_at = None
            return
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
        self._last_step.clear()
        self._tokens_at = None

    def finish(self, status: str = "finished") -> None:
        """Finish the run this callback started (a run passed in is left open)."""
        if self._owns_run and self.run is not None:
            self.run.finish(status)
        if self._owns_run:
            self.run, self._owns_run = None, False

    # -- metrics -----------------------------------------------------------------------------

    def on_log(self, args: Any, state: Any, control: Any, logs: dict[str, Any] | None = None, **kwargs: Any) -> None:
        if not state.is_world_process_zero or self.run is None or not logs:
            return
        numbers: dict[str, float] = {}
        for key, value in logs.items():
            number = to_number(value)
            if number is None:
                if key not in self._warned:
                    self._warned.add(key)
                    log.warning("runcast: not logging %r: %s is not a number", key, type(value).__name__)
                continue
            numbers[key] = number
        if END_OF_TRAINING in numbers:
            skip = ("epoch", "num_input_tokens_seen")
            set_summary(self.run, {summary_key(k): v for k, v in numbers.items() if k not in skip})
            return
        self._interval_throughput(numbers)
        values: dict[str, float] = {}
        for key, number in numbers.items():
            name = map_key(key)
            # "epoch" comes with the train and the eval logs of one step: a metric is written once per step
            if self._last_step.get(name, -1) >= state.global_step:
                continue
            self._last_step[name] = state.global_step
            values[name] = number
        if values:
            self.run.log(values, step=state.global_step)

    def _interval_throughput(self, numbers: dict[str, float]) -> None:
        """Replace the Trainer's tokens/s (an average since the start) by the rate of the last interval."""
        tokens, runtime = numbers.get("num_input_tokens_seen"), numbers.get("train_runtime")
        if tokens is None or runtime is None:
            return
        if self._tokens_at is not None and runtime > self._tokens_at[1]:
            numbers["train_tokens_per_second"] = (tokens - self._tokens_at[0]) / (runtime - self._tokens_at[1])
        self._tokens_at = (tokens, runtime)

    # -- samples -----------------------------------------------------------------------------

    def on_evaluate(self, args: Any, state: Any, control: Any, model: Any = None, processing_class: Any = None,
                    **kwargs: Any) -> None:
        if not self.sample_prompts or not state.is_world_process_zero or self.run is None:
            return
        tokenizer = self.tokenizer or processing_class or kwargs.get("tokenizer")
        reason = ("no model" if model is None else "no tokenizer: pass tokenizer= or the Trainer's processing_class"
                  if tokenizer is None else "the model is sharded across processes" if sharded(model, args) else None)
        if reason is not None:
            if "sample_prompts" not in self._warned:
                self._warned.add("sample_prompts")
                log.warning("runcast: not generating samples for sample_prompts: %s", reason)
            return
        rows = generate_samples(model, tokenizer, self.sample_prompts, self.generation_kwargs)
        self.run.log_samples(rows, step=state.global_step, key=self.samples_key)

    # -- checkpoints -------------------------------------------------------------------------

    def _report_save(self, args: Any, state: Any) -> None:
        assert self.run is not None
        folder = Path(args.output_dir) / f"checkpoint-{state.global_step}"
        if folder.is_dir():
            kept: dict[str, Any] = {"run": self.run.id, "step": state.global_step}
            if self._commands is not None:
                kept["lr_scale"] = self._commands.applied  # a resume goes on with the scale in force
            (folder / RUN_FILE).write_text(json.dumps(kept))
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
        if self._commands is not None:
            self._commands.saved(state.global_step, str(folder))

    def on_save(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        if state.is_world_process_zero and self.run is not None:
            self._report_save(args, state)
        if self._ranks is not None and self._held:  # a checkpoint asked for while paused: hold again
            self._act(state.global_step, control, kwargs)

    # -- commands ----------------------------------------------------------------------------

    def on_step_end(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        if self._ranks is not None:
            self._act(state.global_step, control, kwargs)

    def on_train_end(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        if self._commands is not None:
            self._commands.close(state.global_step)

    def _act(self, step: int, control: Any, kwargs: dict[str, Any]) -> None:
        """The team's commands at this step boundary, on every rank, through the Trainer's control flags."""
        assert self._ranks is not None
        commands = self._commands

        def apply(decision: Decision) -> None:
            if decision.lr_ratio is not None:
                optimizer, scheduler = kwargs.get("optimizer"), kwargs.get("lr_scheduler")
                rescale([optimizer] if optimizer is not None else [], [scheduler] if scheduler is not None else [],
                        decision.lr_ratio)
            if commands is None:
                follow(decision.values)
            if decision.save:
                control.should_save = True
            if decision.stop:
                control.should_training_stop = True

        decision = boundary(self._ranks, (lambda: commands.decide(step)) if commands is not None else None, apply,
                            commands.sleep if commands is not None else time.sleep, until_save=True)
        self._held = decision.hold
