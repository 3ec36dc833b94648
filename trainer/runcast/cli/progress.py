"""Progress bars of the long verbs (import, replay, sync, export, download): one helper.

Standard library only until a bar is drawn (rich is imported then), so the SDK-only verbs use it.

rich bars on standard error when it is a terminal and ``--quiet`` is not given; nothing
otherwise (a pipe or a log file gets the verbs' summary lines only). Each task counts
in one unit: ``bytes`` shows sizes and transfer speed, any other unit (points, events,
rows) shows ``done/total unit`` and a rate.
"""

from __future__ import annotations

import importlib.util
import sys
from typing import Any, Self

TaskId = Any


def wanted(quiet: bool) -> bool:
    """Whether a verb should draw bars: not ``--quiet``, standard error a terminal, and rich
    installed (an SDK-only install has none: no bars)."""
    return not quiet and sys.stderr.isatty() and importlib.util.find_spec("rich") is not None


class Bars:
    """A set of progress bars; every method is a no-op when disabled."""

    def __init__(self, enabled: bool) -> None:
        self._progress: Any = None
        if enabled:
            self._progress = _make_progress()

    def __enter__(self) -> Self:
        if self._progress is not None:
            self._progress.start()
        return self

    def __exit__(self, *exc: object) -> None:
        if self._progress is not None:
            self._progress.stop()

    def task(self, description: str, total: int | None, unit: str = "points", done: int = 0) -> TaskId:
        """A new bar; ``total`` None while unknown (the bar pulses)."""
        if self._progress is None:
            return None
        return self._progress.add_task(description, total=total, completed=done, unit=unit)

    def advance(self, task: TaskId, amount: int) -> None:
        if self._progress is not None:
            self._progress.advance(task, amount)

    def set(self, task: TaskId, done: int) -> None:
        if self._progress is not None:
            self._progress.update(task, completed=done)

    def update(self, task: TaskId, done: int, total: int | None) -> None:
        if self._progress is not None:
            self._progress.update(task, completed=done, total=total)

    def finish(self, task: TaskId, total: int) -> None:
        """Mark a bar complete at ``total`` (e.g. once a total that was unknown is known)."""
        if self._progress is not None:
            self._progress.update(task, total=total, completed=total)


def _make_progress() -> Any:
    from rich.console import Console
    from rich.progress import (
        BarColumn,
        DownloadColumn,
        MofNCompleteColumn,
        Progress,
        ProgressColumn,
        SpinnerColumn,
        TimeElapsedColumn,
        TimeRemainingColumn,
        TransferSpeedColumn,
    )
    from rich.text import Text

    class Amount(ProgressColumn):
        """Bytes as sizes; other units as ``done/total unit``."""

        def __init__(self) -> None:
            super().__init__()
            self._bytes, self._count = DownloadColumn(), MofNCompleteColumn()

        def render(self, task: Any) -> Any:
            unit = task.fields.get("unit", "")
            if unit == "bytes":
                return self._bytes.render(task)
            done = self._count.render(task) if task.total is not None else Text(f"{int(task.completed):,}")
            return Text.assemble(done, f" {unit}")

    class Rate(ProgressColumn):
        def __init__(self) -> None:
            super().__init__()
            self._bytes = TransferSpeedColumn()

        def render(self, task: Any) -> Any:
            if task.fields.get("unit") == "bytes":
                return self._bytes.render(task)
            return Text(f"{task.speed:,.0f}/s" if task.speed else "", style="progress.data.speed")

    return Progress(
        SpinnerColumn(), "[progress.description]{task.description}", BarColumn(), Amount(), Rate(),
        TimeElapsedColumn(), TimeRemainingColumn(), console=Console(stderr=True),
    )
