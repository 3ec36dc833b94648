"""The JSONL and CSV bytes of a page of points, written by orjson a page at a time.

A page of ``(step, value)`` rows goes through ``orjson.dumps`` as a whole (``[[step,value],...]``,
numbers only), and the row's other fields are put around each pair by byte replacement (a page
of one time: no Python object per row is made) or, when its rows have many times, by slice
assignment of the lines' parts and one join. The bytes are
those Python's ``json.dumps`` and ``repr`` write (the format documented in docs/api.md), which
differ from orjson's in two places that are mended here:

- NaN and +-Infinity: orjson writes ``null`` for both; a page with a ``null`` is written row by
  row instead (``"NaN"``, ``"Infinity"``, ``"-Infinity"`` as strings, CSV without quotes).
- Magnitudes below 1e-4: orjson writes ``0.00001`` and ``1e-7`` where ``repr`` writes ``1e-05``
  and ``1e-07``; such numbers (and only numbers, the slice holding nothing else) are rewritten
  by ``repr`` of the float orjson's shortest digits stand for, which is the same float.
"""

from __future__ import annotations

import csv
import io
import json
import re
from collections.abc import Iterator, Sequence
from typing import TYPE_CHECKING, Final, Literal

import orjson

from runcast_server.metrics.step_times import TimePoints, time_runs
from runcast_server.reads.values import stored_value

if TYPE_CHECKING:
    import numpy as np

TextFormat = Literal["jsonl", "csv"]
Row = tuple[int, float | None]  # step, value (NULL = NaN)

# A number written differently by orjson than by repr: at a number's start (after "[" or ","),
# "0.0000..." or an exponent of one digit ("e-5".."e-9"; repr writes at least two).
_UNLIKE_REPR: Final = re.compile(rb"(?<=[\[,])-?(?:0\.0000[0-9]*|[0-9.]+e-[0-9](?![0-9]))")
_SEPARATOR: Final = b"\0"  # never in orjson's output of numbers


# OWASP CSV injection: a text cell starting with one of these is a formula to a spreadsheet.
_FORMULA_START: Final = ("=", "+", "-", "@", "\t", "\r")


def csv_text(text: str) -> str:
    """A text cell (a metric name) that no spreadsheet runs: a leading formula character gets a ``'``."""
    return "'" + text if text.startswith(_FORMULA_START) else text


def _as_repr(match: re.Match[bytes]) -> bytes:
    return repr(float(match.group())).encode()


def _pairs(rows: Sequence[Row]) -> bytes | None:
    """``step,value],[step,value...`` as repr writes the numbers; None if a value is NaN or infinite."""
    body = orjson.dumps(rows)
    if b"null" in body:
        return None
    if b"e-" in body or b"0.0000" in body:
        body = _UNLIKE_REPR.sub(_as_repr, body)
    return body[2:-2]


def _float_texts(values: list[float]) -> Iterator[bytes]:
    """The text ``repr`` (and ``json.dumps``) writes for each finite float of ``values``, in order."""
    if not values:
        return iter(())
    body = orjson.dumps(values)
    if b"e-" in body or b"0.0000" in body:
        body = _UNLIKE_REPR.sub(_as_repr, body)
    return iter(body[1:-1].split(b","))


class PageWriter:
    """Writes pages of one series (its segment and key fixed) in one text format."""

    def __init__(self, fmt: TextFormat, segment: int, key: str) -> None:
        self.fmt = fmt
        if fmt == "jsonl":
            head = json.dumps({"segment": segment, "key": key}, separators=(",", ":"), ensure_ascii=False)
            self._prefix = head[:-1] + ',"step":'
        else:
            cells = io.StringIO()
            csv.writer(cells, lineterminator="\n").writerow((segment, csv_text(key)))
            self._prefix = cells.getvalue()[:-1] + ","
        self._bprefix = self._prefix.encode()

    def _suffixes(self, times: list[float | None]) -> list[bytes]:
        """The end of a line (``,"time":T}`` or ``,T``, and the newline) for each of ``times``."""
        texts = _float_texts([t for t in times if t is not None])
        none = b"null" if self.fmt == "jsonl" else b""
        head, tail = (b',"time":', b"}\n") if self.fmt == "jsonl" else (b",", b"\n")
        return [head + (none if t is None else next(texts)) + tail for t in times]

    def page(self, rows: Sequence[Row], points: TimePoints) -> bytes:
        """The lines of a page of ``rows`` (ascending steps), each with its step's time from ``points``
        (``step_times.time_points``).

        One time for the whole page (a fast loop) puts it after every row by one replacement. A
        run with many times (a step of a second or more has a time each) gets its lines
        assembled from their parts by slice assignment and one join, not a call per time."""
        runs = list(time_runs(rows, points))
        ends = self._suffixes([at for _, _, at in runs])
        pairs = _pairs(rows)
        if pairs is None:
            return b"".join(self._one_by_one(rows[start:end], suffix) for (start, end, _), suffix in zip(runs, ends, strict=True))
        if self.fmt == "jsonl":
            pairs = pairs.replace(b"],[", _SEPARATOR).replace(b",", b',"value":')
        else:
            pairs = pairs.replace(b"],[", _SEPARATOR)
        if len(runs) == 1:
            return self._bprefix + pairs.replace(_SEPARATOR, ends[0] + self._bprefix) + ends[0]
        suffixes: list[bytes] = []
        for (start, end, _), suffix in zip(runs, ends, strict=True):
            suffixes += [suffix] * (end - start)
        lines = [self._bprefix] * (3 * len(rows))
        lines[1::3] = pairs.split(_SEPARATOR)
        lines[2::3] = suffixes
        return b"".join(lines)

    def page_columns(self, steps: np.ndarray, values: np.ndarray, runs: list[tuple[int, int, float | None]]) -> bytes:
        """``page`` of a page read as columns (``arrow_pages.text_columns``): ``steps`` (int64), ``values``
        (float64, NaN for a NULL) and its runs of rows sharing a time, ``(start, end, time)``. The same bytes:
        orjson writes NumPy's numbers as it writes Python's, and each line is put together from its parts."""
        ends = self._suffixes([at for _, _, at in runs])
        body = orjson.dumps(values, option=orjson.OPT_SERIALIZE_NUMPY)
        if b"null" in body:
            rows = list(zip(steps.tolist(), values.tolist(), strict=True))
            return b"".join(self._one_by_one(rows[start:end], suffix) for (start, end, _), suffix in zip(runs, ends, strict=True))
        if b"e-" in body or b"0.0000" in body:
            body = _UNLIKE_REPR.sub(_as_repr, body)
        count = len(steps)
        parts = [self._bprefix, b"", b',"value":' if self.fmt == "jsonl" else b",", b"", b""] * count
        parts[1::5] = orjson.dumps(steps, option=orjson.OPT_SERIALIZE_NUMPY)[1:-1].split(b",")
        parts[3::5] = body[1:-1].split(b",")
        for (start, end, _), suffix in zip(runs, ends, strict=True):
            parts[5 * start + 4:5 * end:5] = [suffix] * (end - start)
        return b"".join(parts)

    def _one_by_one(self, rows: Sequence[Row], suffix: bytes) -> bytes:
        """The lines of ``rows`` (which hold NaN or an infinity) one by one, each ending with ``suffix``."""
        end = suffix.decode()
        if self.fmt == "jsonl":
            lines = [f'{self._prefix}{step},"value":{json.dumps(stored_value(value))}{end}' for step, value in rows]
        else:
            lines = [f"{self._prefix}{step},{_value_text(value)}{end}" for step, value in rows]
        return "".join(lines).encode()


def _value_text(value: float | None) -> str:
    v = stored_value(value)
    return v if isinstance(v, str) else repr(v)
