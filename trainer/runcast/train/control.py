"""The team's hand on the reference trainer (docs/commands.md): the commands it takes between steps.

``stop`` saves a checkpoint at the current step and ends the run (exit 0); ``checkpoint`` saves one
now; ``pause`` holds the loop (the SDK's heartbeats go on) until ``resume`` (or ``stop``); ``set
lr_scale VALUE`` scales the learning-rate schedule from the next logged step on, which is the step
the acknowledgement names. With several ranks (DeepSpeed) rank 0 decides and every rank acts at the
same step: each writes its part of the checkpoint, holds, or takes the new scale (``runcast.integrations._ranks``).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from runcast.integrations._commands import LR_SCALE, StepCommands
from runcast.integrations._ranks import Decision, Ranks, boundary
from runcast.train import checkpoint as ckpt
from runcast.train import loop
from runcast.train.loop import Training


class Control:
    """Takes the run's commands at step boundaries (``act``, on every rank); ``t.lr_scale`` follows the tunable.

    ``ranks``: how rank 0's decisions reach the others (None: several ranks with nothing to agree
    through, so the run does not take commands)."""

    def __init__(self, t: Training, retention: ckpt.Retention, ranks: Ranks | None,
                 sleep: Callable[[float], None] = time.sleep) -> None:
        self.t, self.retention, self.ranks = t, retention, ranks
        self.stopped_at: int | None = None
        self.commands: StepCommands | None = None
        if ranks is None:
            t.log("several ranks and no process group (train with --deepspeed): the team's commands are refused")
            return
        if t.master_process:
            self.commands = StepCommands(t.run, lr_scale=t.lr_scale, sleep=sleep)
        if not ranks.flag(self.commands is not None and self.commands.active):  # every rank takes them, or none
            self.ranks = self.commands = None

    def act(self) -> bool:
        """Handle what the team sent since the last step (holding while paused), on every rank; True to stop now."""
        if self.ranks is None:
            return False
        t, commands = self.t, self.commands
        if commands is not None:
            commands.saved_step = t.saved_step  # "already saved" when the loop just saved this step
        decision = boundary(self.ranks, (lambda: commands.decide(t.step)) if commands is not None else None,
                            self._apply, commands.sleep if commands is not None else time.sleep)
        if decision.stop:
            self.stopped_at = t.step
            t.log(f"step {t.step}: stopped by the team (exit 0)")
        return decision.stop

    def _apply(self, decision: Decision) -> None:
        t = self.t
        if decision.lr_scale is not None:
            t.lr_scale = decision.lr_scale
            t.log(f"step {t.step}: lr_scale {t.lr_scale:g} from step {t.step + 1}")
        if decision.save:
            where = self._checkpoint()
            if self.commands is not None:
                self.commands.saved(t.step, where)

    def _checkpoint(self) -> str:
        """A checkpoint of the current step (validated first), on every rank; where it is."""
        t = self.t
        t.last_val = loop.validate(t)
        t.run.log(t.last_val, step=t.step)
        return loop.save_checkpoint(t, self.retention)


def restored_scale(state: dict[str, Any] | None) -> float:
    """The learning-rate scale in force when the checkpoint was taken (1 without one)."""
    return float(state.get(LR_SCALE, 1.0)) if state else 1.0
