"""The W&B-style module API's state, in one object: ``ModuleRun`` holds the current run
(``runcast.run``) and the ``runcast.config`` and ``runcast.summary`` proxies.

Each proxy reads and writes ``runcast.run.config`` (or ``summary``) of whatever run
``runcast.init`` made last; before ``init`` (and after ``finish``) any use raises RuntimeError.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, MutableMapping
from typing import TYPE_CHECKING, Any

from .record import Synced

if TYPE_CHECKING:
    from .run_handle import Run


class ModuleRun:
    """The one piece of module-level state the SDK keeps: the run the last ``runcast.init`` made
    (``runcast.run``; None before it and after ``runcast.finish``) and the proxies to its
    ``config`` and ``summary``. Besides it the SDK keeps three process-wide things, each in its
    module: the exit hooks (``lifecycle``), the count of ``init()`` calls per launch id (``system``:
    the n-th call of every rank derives the same run) and the bounded memo of metric names and ids
    already checked (``wire.checks``, a pure check's cache)."""

    __slots__ = ("config", "run", "summary")

    def __init__(self) -> None:
        self.run: Run | None = None
        self.config = Current("config", lambda: self.run)
        self.summary = Current("summary", lambda: self.run)

    def required(self, verb: str) -> Run:
        """The current run; RuntimeError naming ``runcast.<verb>()`` when there is none."""
        if self.run is None:
            raise RuntimeError(f"runcast.{verb}() needs a run: call runcast.init(...) first")
        return self.run


class Current(MutableMapping[str, Any]):
    """``runcast.<field>``: the current run's ``config`` or ``summary``."""

    __slots__ = ("_field", "_run")

    def __init__(self, field: str, run: Callable[[], Any]) -> None:
        object.__setattr__(self, "_field", field)
        object.__setattr__(self, "_run", run)

    def _target(self) -> Synced:
        run = self._run()
        if run is None:
            raise RuntimeError(f"runcast.{self._field} needs a run: call runcast.init(...) first")
        target: Synced = getattr(run, self._field)
        return target

    def update(self, other: Any = (), /, **changes: Any) -> None:
        """``runcast.run.<field>.update(...)``."""
        self._target().update(other, **changes)

    def __getitem__(self, key: str) -> Any:
        return self._target()[key]

    def __setitem__(self, key: str, value: Any) -> None:
        self._target()[key] = value

    def __delitem__(self, key: str) -> None:
        del self._target()[key]

    def __iter__(self) -> Iterator[str]:
        return iter(self._target())

    def __len__(self) -> int:
        return len(self._target())

    def __getattr__(self, name: str) -> Any:
        if name.startswith("_"):  # copy, pickle and friends probing: not config keys
            raise AttributeError(name)
        return getattr(self._target(), name)

    def __setattr__(self, name: str, value: Any) -> None:
        setattr(self._target(), name, value)

    def as_dict(self) -> dict[str, Any]:
        """A plain copy."""
        return self._target().as_dict()

    def __repr__(self) -> str:
        run = self._run()
        return repr(getattr(run, self._field)) if run is not None else f"{self._field}(no run)"
