"""``runcast.Image``, ``runcast.Table`` and ``runcast.Histogram``: values ``run.log`` (or
``run.log_media``) records as ``media`` events instead of metrics (docs/samples.md).

Each checks what it was given when it is made (a mistake raises there, naming the argument)
and copies nothing until it is logged: ``snapshot`` is called by the run, on the training
thread, only when the run records (not on a disabled run or another rank).
"""

from __future__ import annotations

import numbers
from collections.abc import Callable, Sequence
from typing import Any

from . import histograms, images
from .wire.checks import EventError
from .wire.model_outputs import media_body

# The media worker's side of a snapshot: the event body's kind fields, made off the training thread
# (an image: the encoded bytes and their header; a histogram: the bins).
Prepared = Callable[[], "images.Encoded | dict[str, Any]"]


class Media:
    """What the media kinds share: a ``kind`` and an optional ``caption``."""

    kind = ""

    def __init__(self, caption: str | None) -> None:
        self.caption = caption

    def stub(self) -> dict[str, Any]:
        """The kind's fields as the event check wants them (placeholders where the worker fills them in)."""
        raise NotImplementedError

    def snapshot(self) -> Prepared | None:
        """A copy taken on the training thread, prepared later on the media worker; None: ``stub`` is the body."""
        return None


class Image(Media):
    """An image: PNG or JPEG bytes, a file path, a numpy array (H×W, H×W×3, H×W×4; uint8, or floats in
    [0, 1]), a torch tensor (C×H×W or H×W×C) or a PIL image. Uploaded as PNG (JPEG bytes stay JPEG)."""

    kind = "image"

    def __init__(self, data: Any, caption: str | None = None) -> None:
        super().__init__(caption)
        self._source = images.source(data)

    def stub(self) -> dict[str, Any]:
        return {"kind": "image", "blob": "0" * 64, "content_type": "image/png", "width": 1, "height": 1, "size": 1}

    def snapshot(self) -> Prepared:
        return self._source.snapshot()


class Histogram(Media):
    """The distribution of ``values`` (a tensor, a numpy array or a list of numbers) in ``bins`` equal-width
    bins between the finite minimum and maximum, with NaN and ±Inf counted apart; binned on the trainer."""

    kind = "histogram"

    def __init__(self, values: Any, bins: int = 64, caption: str | None = None) -> None:
        super().__init__(caption)
        histograms.check(values, bins)
        self._values = values
        self._bins = bins

    def stub(self) -> dict[str, Any]:
        return {"kind": "histogram", "edges": [0.0, 1.0], "counts": [0.0]}

    def snapshot(self) -> Prepared:
        pending = histograms.snapshot(self._values, self._bins)
        return lambda: pending()._asdict()


class Table(Media):
    """A small table: ``columns`` (1-64 names) and ``rows`` (at most 1,000 lists of one cell per column:
    text, a number, a boolean or None). Checked now: ValueError naming the cell (``rows.2.1``)."""

    kind = "table"

    def __init__(self, columns: Sequence[str], rows: Sequence[Sequence[Any]], caption: str | None = None) -> None:
        super().__init__(caption)
        if isinstance(columns, str) or not isinstance(columns, Sequence):
            raise TypeError(f"Table: columns must be a list of names, got {type(columns).__name__}")
        if isinstance(rows, str) or not isinstance(rows, Sequence):
            raise TypeError(f"Table: rows must be a list of rows, got {type(rows).__name__}")
        body = {"kind": "table", "columns": list(columns),
                "rows": [[_cell(c) for c in row] if _is_row(row) else row for row in rows]}
        try:
            checked = media_body({"step": 0, "key": "table", **body})
        except EventError as exc:
            raise ValueError(f"Table: {exc}") from None
        self._body = {"kind": "table", "columns": checked["columns"], "rows": checked["rows"]}

    def stub(self) -> dict[str, Any]:
        return self._body


def _is_row(row: Any) -> bool:
    return not isinstance(row, (str, bytes)) and isinstance(row, Sequence)


def _cell(value: Any) -> Any:
    """numpy and torch scalars as Python numbers (what the wire holds); anything else as given."""
    if isinstance(value, (str, bool, int, float)) or value is None:
        return value
    if type(value).__name__ == "bool_":
        return bool(value)
    if isinstance(value, numbers.Integral):
        return int(value)
    if isinstance(value, numbers.Real):
        return float(value)
    item = getattr(value, "item", None)
    return item() if callable(item) and getattr(value, "numel", lambda: 0)() == 1 else value
