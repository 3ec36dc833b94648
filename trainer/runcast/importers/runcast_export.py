"""Runcast's own exports (``GET /api/v1/runs/{id}/export?format=jsonl|csv``), read back exactly.

Rows are ``segment, key, step, value, time``: segment indexes, metric names, steps and values
come back as they were, and each step's ``time`` becomes its metrics event's ``ts`` (so the
server records it again as that step's ``_timestamp``, to the same 0.1 s); so export -> import
-> export gives the same bytes (the run id is not in the body). Exports made before the
``time`` column (``segment, key, step, value``) are read too, without times. Rows of the
``_timestamp`` series itself (an export of that key alone) are left out: their times are the
time column's. Segment indexes with no rows in the export are made as empty segments, so the
indexes match. The CSV export neutralises a metric name that starts with a formula character
by a leading ``'``; that ``'`` is taken off again here. The export holds no config or name: the
run is named after the file, unless the run file ``runcast export --output`` writes beside it
is there (``runcast_run_file``).
"""

from __future__ import annotations

import csv
import hashlib
import json
import math
from collections.abc import Iterator
from pathlib import Path
from typing import Any, Final

from runcast.importers import runcast_run_file
from runcast.importers.model import (
    MAX_SEGMENTS,
    ImportFailed,
    Segment,
    Series,
    SourceRun,
)
from runcast.wire import events

NAME: Final = "runcast"
COLUMNS: Final = ("segment", "key", "step", "value", "time")
UNTIMED: Final = COLUMNS[:4]  # exports made before the time column
# The CSV export's formula guard (runcast_server.metrics.export.csv_text), undone.
_FORMULA_START: Final = ("=", "+", "-", "@", "\t", "\r")


def is_export_header(fields: list[str] | None) -> bool:
    return fields is not None and tuple(fields) in (COLUMNS, UNTIMED)


def read(path: Path) -> list[SourceRun]:
    """The run of one export file (JSONL or CSV, told apart by the first line)."""
    segments: dict[int, Segment] = {}
    first = ""
    good_keys: set[str] = set()
    for line, raw in _rows(path):
        where = f"{path}:{line}"
        if not first:
            first = json.dumps(raw)
        try:
            segment, key, step, value, ts = _fields(raw, good_keys)
        except (TypeError, ValueError) as exc:
            raise ImportFailed(where, str(exc)) from None
        if key == events.TIMESTAMP_KEY:
            continue
        series = segments.setdefault(segment, Segment(label=str(segment))).series.setdefault(key, Series())
        if series.steps and step <= series.steps[-1]:
            raise ImportFailed(where, f"step {step} of {key!r} in segment {segment} is not after step {series.steps[-1]}")
        series.steps.append(step)
        series.values.append(value)
        series.times.append(ts)
    if segments and max(segments) >= MAX_SEGMENTS:
        raise ImportFailed(str(path), f"segment indexes of {MAX_SEGMENTS} and above are not supported")
    ordered = [segments.get(i, Segment(label=str(i))) for i in range(max(segments) + 1)] if segments else [Segment()]
    identity = f"{path.name}\0{hashlib.sha256(first.encode()).hexdigest()}"
    run = SourceRun(
        format=NAME,
        identity=identity,
        name=path.name.rsplit(".", 1)[0],
        segments=ordered,
        env={"imported_from": {"format": NAME, "file": path.name}},
    )
    described = runcast_run_file.path_for(path)
    if described.is_file():
        runcast_run_file.apply(run, described)
    return [run]


def _rows(path: Path) -> Iterator[tuple[int, Any]]:
    try:
        with open(path, newline="", encoding="utf-8") as f:
            head = f.readline()
            f.seek(0)
            if head.lstrip().startswith("{"):
                for number, line in enumerate(f, 1):
                    if line.strip():
                        try:
                            yield number, json.loads(line)
                        except json.JSONDecodeError as exc:
                            raise ImportFailed(f"{path}:{number}", f"not JSON ({exc.msg})") from None
                return
            reader = csv.reader(f)
            if not is_export_header(next(reader, None)):
                raise ImportFailed(f"{path}:1", f"the header must be {','.join(COLUMNS)}")
            for row in reader:
                yield reader.line_num, row
    except UnicodeDecodeError as exc:
        raise ImportFailed(str(path), f"not UTF-8 text (byte {exc.start})") from None


def _fields(raw: Any, good_keys: set[str]) -> tuple[int, str, int, float, float]:
    """(segment, key, step, value, time or NaN) of a JSONL object or a CSV row; TypeError or ValueError naming the field."""
    if isinstance(raw, dict):
        segment, key, step, value, ts = _from_object(raw)
    elif isinstance(raw, list):
        segment, key, step, value, ts = _from_cells(raw)
    else:
        raise TypeError("not a JSON object")
    if isinstance(segment, bool) or not isinstance(segment, int) or segment < 0:
        raise ValueError(f"'segment' {segment!r} is not an index >= 0")
    if isinstance(step, bool) or not isinstance(step, int) or not 0 <= step <= events.MAX_STEP:
        raise ValueError(f"'step' {step!r} is not an integer in [0, {events.MAX_STEP}]")
    if ts is not None and (isinstance(ts, bool) or not isinstance(ts, (int, float)) or not 0 <= ts <= events.MAX_TS):
        raise ValueError(f"'time' {ts!r} is not seconds since the epoch in [0, {events.MAX_TS:.0f}]")
    if key not in good_keys:
        events.check_key(key, "key")
        good_keys.add(key)
    return segment, key, step, float(value), math.nan if ts is None else float(ts)


def _from_object(raw: dict[str, Any]) -> tuple[Any, Any, Any, Any, Any]:
    """The fields of a JSONL object as given, its value a number (NaN and the infinities by name)."""
    if set(raw) not in (set(COLUMNS), set(UNTIMED)):
        raise ValueError(f"an export row has exactly the fields {', '.join(COLUMNS)} (or all but time)")
    segment, key, step, value = (raw[c] for c in UNTIMED)
    if isinstance(value, str):
        if value not in events.NONFINITE:
            raise ValueError(f"'value' {value!r} is not a number")
        value = events.NONFINITE[value]
    elif isinstance(value, bool) or not isinstance(value, (int, float)):
        raise TypeError(f"'value' {value!r} is not a number")
    return segment, key, step, value, raw.get("time")


def _from_cells(raw: list[Any]) -> tuple[Any, Any, Any, Any, Any]:
    """The fields of a CSV row parsed (the quote that kept a key from being read as a formula removed)."""
    if len(raw) not in (len(COLUMNS), len(UNTIMED)):
        raise ValueError(f"expected {len(COLUMNS)} cells ({','.join(COLUMNS)}), got {len(raw)}")
    segment, key, step, value = raw[:4]
    ts = raw[4] if len(raw) > 4 and raw[4] != "" else None
    if key.startswith("'") and key[1:2] and key[1] in _FORMULA_START:
        key = key[1:]
    segment, step = _integer(segment, "segment"), _integer(step, "step")
    try:
        value = float(value)
        ts = None if ts is None else float(ts)
    except ValueError:
        raise ValueError(f"'value' {value!r} or 'time' {ts!r} is not a number") from None
    return segment, key, step, value, ts


def _integer(text: str, field: str) -> int:
    try:
        return int(text)
    except ValueError:
        raise ValueError(f"{field!r} {text!r} is not an integer") from None
