"""The team's commands (docs/commands.md) at a framework's step boundary: what the Hugging Face and
Lightning callbacks and the reference trainer share. On rank 0 (the only rank whose run receives
commands) ``decide`` turns what the team sent into a ``Decision`` (save, stop, hold, a new learning-rate
scale), which ``runcast.integrations._ranks.boundary`` hands to every rank, so that all act at the same step; the
framework saves when told and reports the save with ``saved``: ``stop`` and ``checkpoint`` are
acknowledged then, once, by rank 0, at that step, naming the checkpoint.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterable
from pathlib import PurePath
from typing import Any, Final

from runcast.commands import TUNABLES_KEY, Command, Tunable
from runcast.integrations._ranks import Decision

log = logging.getLogger("runcast")

LR_SCALE: Final = "lr_scale"
LR_SCALE_BOUNDS: Final = (0.01, 10.0)


class StepCommands:
    """Takes a run's commands at step boundaries, on rank 0 (``decide``, ``saved``, ``close``)."""

    def __init__(self, run: Any, lr_scale: float = 1.0, sleep: Callable[[float], None] = time.sleep) -> None:
        self.run, self.sleep = run, sleep
        self.paused = False
        self.stopping = False
        self.saved_step: int | None = None
        self._saving: list[Command] = []  # stop / checkpoint commands acknowledged by the next save
        self.applied = lr_scale  # the scale the optimizer runs with
        low, high = LR_SCALE_BOUNDS
        declared = run.tunable(LR_SCALE, lr_scale, min=low, max=high)  # declares it and opts in
        self.scale: Tunable | None = declared if isinstance(declared, Tunable) else None  # None: offline

    @property
    def active(self) -> bool:
        """This process takes commands."""
        return self.scale is not None

    def decide(self, step: int) -> Decision:
        """Handle the commands waiting (without waiting for more): what every rank does at this boundary."""
        decision = Decision()
        for command in self._take():
            self._handle(command, step, decision)
        decision.hold = self.paused and not decision.stop
        return decision

    def saved(self, step: int, where: str) -> None:
        """The framework saved a checkpoint of ``step`` at ``where``: acknowledge the commands that asked for it.

        The answer is on the run's public record, so it names the checkpoint, not the directory it is in."""
        self.saved_step = step
        name = PurePath(where).name or where
        waiting, self._saving = self._saving, []
        for command in waiting:
            stopping = "; training stops" if command.kind == "stop" else ""
            command.ack(step=step, message=f"checkpoint saved at step {step} ({name}){stopping}")

    def close(self, step: int) -> None:
        """Training ended: refuse what still waits for a checkpoint that will not come."""
        waiting, self._saving = self._saving, []
        for command in waiting:
            command.refuse(f"training ended at step {step} before the checkpoint was saved", step=step)

    def _take(self) -> Iterable[Command]:
        return list(self.run.commands() or [])

    def _handle(self, command: Command, step: int, decision: Decision) -> None:
        kind = command.kind
        if kind in ("stop", "checkpoint"):
            if kind == "stop":
                decision.stop = self.stopping = True
            if self.saved_step == step:  # e.g. a checkpoint asked for while paused: nothing changed since
                stopping = "; training stops" if kind == "stop" else ""
                command.ack(step=step, message=f"checkpoint of step {step} already saved{stopping}")
            else:
                decision.save = True
                self._saving.append(command)
        elif kind in ("pause", "resume"):
            self._pause(command, step, kind == "pause")
        elif kind == "set" and command.name == LR_SCALE and self.scale is not None:
            # The next optimizer step is the first with the new scale: that is the step acknowledged.
            command.ack(step=step + 1, message=f"learning rate x{float(command.value):g} from step {step + 1}")
            ratio = self.scale.value / self.applied
            decision.lr_ratio = ratio * (decision.lr_ratio or 1.0)
            decision.lr_scale = self.applied = self.scale.value
        elif kind == "set" and command.name in (self.run.config.get(TUNABLES_KEY) or {}):
            command.ack(step=step + 1, message=f"{command.name} = {command.value} from step {step + 1}")
            decision.values[str(command.name)] = float(command.value)  # the other ranks' copies of the tunable
        else:
            command.refuse(f"this trainer takes no {kind} {command.name or ''}".rstrip(), step=step)

    def _pause(self, command: Command, step: int, pause: bool) -> None:
        if self.paused == pause:
            command.refuse("already paused" if pause else "not paused", step=step)
            return
        self.paused = pause
        command.ack(step=step, message=f"{'paused' if pause else 'resumed'} at step {step}")


def follow(values: dict[str, float]) -> None:
    """On a rank other than 0: the declared tunables the team set at this boundary (``decision.values``) take
    the values rank 0 acknowledged, in the script's run (``runcast.run``: each rank declared them)."""
    import runcast

    if values and runcast.run is not None:
        runcast.run._inbox.assign(values)


def rescale(optimizers: Iterable[Any], schedulers: Iterable[Any], ratio: float) -> None:
    """Multiply the learning rate by ``ratio``: each param group's, and each scheduler's base rates, so the
    schedule the scheduler computes from them next (warmup, decay) is scaled too, and the rates it last
    computed (``get_last_lr``, what the Trainer logs as the step's learning rate)."""
    for optimizer in optimizers:
        for group in optimizer.param_groups:
            group["lr"] = group["lr"] * ratio
            if "initial_lr" in group:
                group["initial_lr"] = group["initial_lr"] * ratio
    for scheduler in schedulers:
        inner = getattr(scheduler, "scheduler", scheduler)  # accelerate wraps the scheduler
        base = getattr(inner, "base_lrs", None)
        if isinstance(base, list):
            inner.base_lrs = [lr * ratio for lr in base]
        last = getattr(inner, "_last_lr", None)
        if isinstance(last, list):
            inner._last_lr = [lr * ratio for lr in last]
