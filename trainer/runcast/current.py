"""``runcast.config`` and ``runcast.summary``: the current run's mappings, as ``wandb.config`` is.

Each is a proxy that reads and writes ``runcast.run.config`` (or ``summary``) of whatever run
``runcast.init`` made last; before ``init`` (and after ``finish``) any use raises RuntimeError.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, MutableMapping
from typing import Any

from .record import Synced


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
