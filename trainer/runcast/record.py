"""``run.config`` and ``run.summary``: mappings whose every change is sent as an ``update`` event.

Setting a key (``run.config["lr"] = 1e-4``, ``run.config.lr = 1e-4``, ``update({...})``)
validates the value on the caller's thread (a JSON-safe copy, as ``init(config=)`` makes)
and queues one event; the server replaces those top-level keys. Keys cannot be removed.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping, MutableMapping
from typing import Any

from .values import json_object


class Synced(MutableMapping[str, Any]):
    """A dict whose changes ``send`` queues (``{field: changed keys}``)."""

    __slots__ = ("_data", "_field", "_send")

    def __init__(self, field: str, initial: Mapping[str, Any], send: Callable[[dict[str, Any]], None]) -> None:
        object.__setattr__(self, "_field", field)
        object.__setattr__(self, "_data", dict(initial))
        object.__setattr__(self, "_send", send)

    def update(self, other: Any = (), /, *, allow_val_change: bool = True, **changes: Any) -> None:
        """Set several keys in one event (a mapping, a dataclass or argparse.Namespace, or keywords).

        ``allow_val_change`` is W&B's keyword, accepted and not stored: a value may always change.
        """
        patch = json_object(other, self._field) if other != () else {}
        patch.update(json_object(changes, self._field))
        if patch:
            self._send({self._field: patch})  # validated there first: a refused patch changes nothing here
            self._data.update(patch)

    def __setitem__(self, key: str, value: Any) -> None:
        self.update({key: value})

    def __delitem__(self, key: str) -> None:
        raise TypeError(f"run.{self._field} keys cannot be removed (set the key to None instead)")

    def __getitem__(self, key: str) -> Any:
        return self._data[key]

    def __iter__(self) -> Iterator[str]:
        return iter(self._data)

    def __len__(self) -> int:
        return len(self._data)

    def __getattr__(self, name: str) -> Any:
        try:
            return self._data[name]
        except KeyError:
            raise AttributeError(f"run.{self._field} has no key {name!r}") from None

    def __setattr__(self, name: str, value: Any) -> None:
        self.update({name: value})

    def as_dict(self) -> dict[str, Any]:
        """A plain copy."""
        return dict(self._data)

    def __repr__(self) -> str:
        return f"{self._field}({self._data!r})"
