"""A batch's events as the sender holds them: each metrics item of the queue stays the tuple it was,
and becomes a wire event only when something asks for one (an old server that refuses columns, a
batch halved at a refusal). The body carries the items as columns (``wire.columns``), built from
the tuples: no dict is made a logged step on the way to the server.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from math import isfinite
from typing import Any, overload

from ..wire.checks import encode_value
from ..wire.columns import (
    MIN_COLUMN_ROWS,
    column_values,
    columns_event,
    encode_columns,
    wire_columns,
)
from ..wire.limits import SCHEMA_VERSION, SYSTEM_PREFIX
from .outbox import Item

Element = Item | dict[str, Any]  # a metrics item (its values read) or another event, already a wire event


def metrics_event(item: Item, run: str, segment: str) -> dict[str, Any]:
    """The wire event of a metrics item whose values are read (floats; a non-finite one as its string)."""
    seq, _, ts, step, values = item
    if not isfinite(sum(values.values())):  # all finite (the usual case): the floats go as they are
        values = {key: encode_value(value) for key, value in values.items()}
    return {"v": SCHEMA_VERSION, "type": "metrics", "run": run, "segment": segment, "seq": seq, "ts": ts,
            "step": step, "values": values}


class Rows(Sequence[dict[str, Any]]):
    """The wire events of one run and segment, metrics items made into events only when read."""

    __slots__ = ("_elements", "_run", "_segment")

    def __init__(self, elements: list[Element], run: str, segment: str) -> None:
        self._elements = elements
        self._run = run
        self._segment = segment

    def __len__(self) -> int:
        return len(self._elements)

    @overload
    def __getitem__(self, index: int) -> dict[str, Any]: ...

    @overload
    def __getitem__(self, index: slice) -> Rows: ...

    def __getitem__(self, index: int | slice) -> dict[str, Any] | Rows:
        if isinstance(index, slice):
            return Rows(self._elements[index], self._run, self._segment)
        return self._event(self._elements[index])

    def __iter__(self) -> Iterator[dict[str, Any]]:
        return map(self._event, self._elements)

    def points(self) -> int:
        """The values its metrics items carry."""
        return sum(len(e[4]) for e in self._elements if type(e) is tuple)

    def with_columns(self) -> list[dict[str, Any]]:
        """What ``encode_columns`` makes of these events, built from the items themselves."""
        items = [e for e in self._elements if type(e) is tuple]
        if len(items) < MIN_COLUMN_ROWS:
            return list(self)
        values = column_values([item[4] for item in items])
        if any(key.startswith(SYSTEM_PREFIX) for key in values):  # a system metric logged by hand: go one by one
            return encode_columns(list(self))
        event = columns_event(self._run, self._segment, items[0][0], [item[3] for item in items],
                              [item[2] for item in items], wire_columns(values))
        # As encode_columns: the columns stand where the first metrics item was, the other events keep their order.
        first = next(i for i, e in enumerate(self._elements) if type(e) is tuple)
        others = [e for e in self._elements if type(e) is dict]
        return [*others[:first], event, *others[first:]]

    def _event(self, element: Element) -> dict[str, Any]:
        return element if type(element) is dict else metrics_event(element, self._run, self._segment)  # type: ignore[arg-type]
