"""``run.log(..., commit=False)``: values held for the step the next committing ``log`` records.

As W&B does: calls with ``commit=False`` gather values (a later value of a name replaces an
earlier one); the next call without it records them with its own values, at its step. A call
whose explicit step differs from the step the held values were given records them first, at
their step; ``finish()`` records what is still held. Held values are checked when recorded.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

Logged = tuple[dict[str, Any], int | None]  # (metrics, step) to record, in order


class Pending:
    """The values of ``commit=False`` calls not recorded yet, and the step they were given."""

    __slots__ = ("metrics", "step")

    def __init__(self) -> None:
        self.metrics: dict[str, Any] = {}
        self.step: int | None = None

    def take(self, metrics: Mapping[str, Any], step: int | None, commit: bool | None) -> list[Logged]:
        """What to record now of a ``log(metrics, step, commit)`` call, given what is held."""
        out: list[Logged] = []
        if self.metrics and step is not None and self.step is not None and step != self.step:
            out.append(self.drain())  # another step: the held values are recorded at theirs first
        if commit is False:
            if not isinstance(metrics, Mapping):
                raise TypeError(f"metrics must be a dict of name -> number, got {type(metrics).__name__}")
            self.metrics.update(metrics)
            self.step = step if step is not None else self.step
            return out
        held = self.drain()
        out.append(({**held[0], **metrics}, step if step is not None else held[1]))
        return out

    def drain(self) -> Logged:
        """The held values and their step, now forgotten."""
        held = (self.metrics, self.step)
        self.metrics, self.step = {}, None
        return held
