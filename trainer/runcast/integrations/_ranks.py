"""Every rank acts at the same step (docs/commands.md): rank 0, the only rank whose run receives the
team's commands, decides at each step boundary what all ranks do (``Decision``), and the framework's
own collective carries the decision to the others (``TorchRanks``: one small tensor per boundary;
``ObjectRanks``: a framework's object broadcast, such as Lightning's ``trainer.strategy.broadcast``).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Final, Protocol

PAUSE_POLL_S: Final = 0.2


@dataclass
class Decision:
    """What every rank does at this step boundary."""

    save: bool = False
    stop: bool = False
    hold: bool = False  # paused: every rank decides again at this boundary, PAUSE_POLL_S later
    lr_ratio: float | None = None  # multiply the learning rate (and its schedule) by this from the next step
    lr_scale: float | None = None  # the learning-rate scale in force from the next step (with lr_ratio)
    values: dict[str, float] = field(default_factory=dict)  # declared tunables set here: name -> value


class Ranks(Protocol):
    """Rank 0's choices, on every rank: rank 0 passes its own, the others anything (it is ignored)."""

    def decision(self, decision: Decision | None) -> Decision: ...

    def flag(self, on: bool) -> bool: ...


class One:
    """A world of one process: nothing to send."""

    def decision(self, decision: Decision | None) -> Decision:
        return decision if decision is not None else Decision()

    def flag(self, on: bool) -> bool:
        return on


class ObjectRanks:
    """A framework's broadcast of a picklable object from rank 0 (``broadcast(obj) -> rank 0's obj``)."""

    def __init__(self, broadcast: Callable[[Any], Any]) -> None:
        self._broadcast = broadcast

    def decision(self, decision: Decision | None) -> Decision:
        shared: Decision = self._broadcast(decision if decision is not None else Decision())
        return shared

    def flag(self, on: bool) -> bool:
        return bool(self._broadcast(on))


class TorchRanks:
    """``torch.distributed`` (an initialised default group): six numbers per boundary in one broadcast,
    and, only at a boundary that sets declared tunables, their values as objects after it."""

    def __init__(self) -> None:
        import torch
        import torch.distributed as dist

        self._dist = dist
        self._device = torch.device("cuda", torch.cuda.current_device()) if dist.get_backend() == "nccl" \
            else torch.device("cpu")

    def decision(self, decision: Decision | None) -> Decision:
        import torch

        d = decision if decision is not None else Decision()
        nan = math.nan
        numbers = torch.tensor([d.save, d.stop, d.hold, nan if d.lr_ratio is None else d.lr_ratio,
                                nan if d.lr_scale is None else d.lr_scale, bool(d.values)],
                               dtype=torch.float64, device=self._device)
        self._dist.broadcast(numbers, src=0)
        save, stop, hold, ratio, scale, more = numbers.tolist()
        values = dict(d.values)
        if more:
            box: list[Any] = [values]
            self._dist.broadcast_object_list(box, src=0, device=self._device)
            values = dict(box[0])
        return Decision(bool(save), bool(stop), bool(hold), None if math.isnan(ratio) else ratio,
                        None if math.isnan(scale) else scale, values)

    def flag(self, on: bool) -> bool:
        import torch

        number = torch.tensor([float(on)], dtype=torch.float64, device=self._device)
        self._dist.broadcast(number, src=0)
        return bool(number.item())


def torch_ranks(world_size: int) -> Ranks | None:
    """The ranks of this process's world: ``One`` alone, ``TorchRanks`` over an initialised process group,
    None with several ranks and no group (nothing to agree through)."""
    if world_size <= 1:
        return One()
    import torch.distributed as dist

    return TorchRanks() if dist.is_available() and dist.is_initialized() else None


def boundary(ranks: Ranks, decide: Callable[[], Decision] | None, act: Callable[[Decision], None],
             sleep: Callable[[float], None], until_save: bool = False) -> Decision:
    """At a step boundary, on every rank: rank 0 decides (``decide``; None on the others), every rank acts on
    the same decision. While it holds (paused), again after ``PAUSE_POLL_S`` (rank 0 sleeps, the others wait
    in the collective), until it does not, it stops, or (``until_save``) the framework must save first."""
    while True:
        decision = ranks.decision(decide() if decide is not None else None)
        act(decision)
        if decision.stop or not decision.hold or (until_save and decision.save):
            return decision
        if decide is not None:
            sleep(PAUSE_POLL_S)
