"""The team's hand on the reference trainer (docs/commands.md): the commands it takes between steps.

``stop`` saves a checkpoint at the current step and ends the run (exit 0); ``checkpoint`` saves one
now; ``pause`` holds the loop (the SDK's heartbeats go on) until ``resume`` (or ``stop``); ``set
lr_scale VALUE`` scales the learning-rate schedule from the next logged step on, which is the step
the acknowledgement names. Only a single process takes commands: with several ranks every rank would
have to act at the same step, which is not built yet, so such a run refuses them (the SDK's message).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any, Final

from runcast.commands import Command, Tunable
from runcast.train import checkpoint as ckpt
from runcast.train import loop
from runcast.train.loop import Training

LR_SCALE: Final = "lr_scale"
LR_SCALE_BOUNDS: Final = (0.01, 10.0)
PAUSE_POLL_S: Final = 0.2


class Control:
    """Takes the run's commands at step boundaries (``act``); ``t.lr_scale`` follows the tunable."""

    def __init__(self, t: Training, retention: ckpt.Retention, world_size: int,
                 sleep: Callable[[float], None] = time.sleep) -> None:
        self.t, self.retention, self.sleep = t, retention, sleep
        self.scale: Tunable | None = None
        self.paused = False
        self.stopped_at: int | None = None
        if world_size == 1 and t.master_process:
            low, high = LR_SCALE_BOUNDS
            declared = t.run.tunable(LR_SCALE, t.lr_scale, min=low, max=high)
            self.scale = declared if isinstance(declared, Tunable) else None  # None: offline

    def act(self) -> bool:
        """Handle what the team sent since the last step (waiting while paused); True to stop now."""
        if self.scale is None:
            return False
        while True:
            for command in self._take():
                self._handle(command)
                if self.stopped_at is not None:
                    return True
            if not self.paused:
                return False
            self.sleep(PAUSE_POLL_S)

    def _take(self) -> list[Command]:
        return list(self.t.run.commands() or [])

    def _handle(self, command: Command) -> None:
        t = self.t
        if command.kind == "stop":
            message = self._checkpoint()
            self.stopped_at = t.step
            command.ack(step=t.step, message=f"{message}; stopping (exit 0)")
            t.log(f"step {t.step}: stopped by {command.sender} ({command.reason})")
        elif command.kind == "checkpoint":
            command.ack(step=t.step, message=self._checkpoint())
        elif command.kind == "pause":
            self._pause(command, True)
        elif command.kind == "resume":
            self._pause(command, False)
        elif command.kind == "set" and command.name == LR_SCALE:
            # The update that the next step logs is the first with the new scale: that is the step acknowledged.
            command.ack(step=t.step + 1, message=f"learning rate x{float(command.value):g} from step {t.step + 1}")
            assert self.scale is not None  # act() returns before taking commands without it
            t.lr_scale = self.scale.value
            t.log(f"step {t.step}: lr_scale {t.lr_scale:g} from step {t.step + 1} ({command.sender})")
        else:
            command.refuse(f"the reference trainer has no {command.kind} {command.name or ''}".rstrip(), step=t.step)

    def _pause(self, command: Command, pause: bool) -> None:
        t = self.t
        if self.paused == pause:
            command.refuse("already paused" if pause else "not paused", step=t.step)
            return
        self.paused = pause
        command.ack(step=t.step, message=f"{'paused' if pause else 'resumed'} at step {t.step}")
        t.log(f"step {t.step}: {'paused' if pause else 'resumed'} by {command.sender} ({command.reason})")

    def _checkpoint(self) -> str:
        """A checkpoint of the current step (validated first), unless the loop just saved it."""
        t = self.t
        if t.saved_step == t.step:
            return f"checkpoint of step {t.step} already saved"
        t.last_val = loop.validate(t)
        t.run.log(t.last_val, step=t.step)
        loop.save_checkpoint(t, self.retention)
        return f"checkpoint saved at step {t.step}"


def restored_scale(state: dict[str, Any] | None) -> float:
    """The learning-rate scale in force when the checkpoint was taken (1 without one)."""
    return float(state.get(LR_SCALE, 1.0)) if state else 1.0
