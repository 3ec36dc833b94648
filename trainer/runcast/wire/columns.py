"""The columnar form of a dense series: many ``metrics`` events of one run and segment as one
``metrics_columns`` event (docs/ingest.md#columnar-metrics).

On the wire::

    {"v": 1, "type": "metrics_columns", "run": ..., "segment": ..., "seq": <first row's seq>,
     "ts": <first row's ts>, "steps": [s0, s1, ...], "times": [t0, t1, ...],
     "values": {"loss": [v0, v1, ...], "lr": [null, 0.1, ...]}}

Row ``i`` stands for the metrics event ``{"step": steps[i], "ts": times[i], "values": {key:
values[key][i] for each key whose entry is not null}}``, and is stored exactly as that event
would be (first occurrence of a step wins, in row order). ``null`` means "not logged at this
row" (NaN and +-Inf travel as strings, as in ``metrics``). Every row logs at least one value.
Each row counts as one event against ``MAX_BATCH_EVENTS``; keys are at most
``MAX_METRICS_PER_EVENT``; ``system/`` keys are not taken (the system sampler's events go one by
one: their step is a wall-clock second). A server that takes the form lists ``metrics_columns``
in the ``event_types`` of ``GET /api/v1/whoami``; the SDK sends it only then.

Validation touches the arrays with C-level operations (``set(map(type, ...))``, ``min``,
``max``) and decodes values one by one only when a column holds something other than floats
and nulls. This module uses only the standard library: the SDK and the backend import it.
"""

from __future__ import annotations

from collections.abc import Mapping
from itertools import compress
from math import isfinite
from operator import is_not
from typing import Any, Final

from .checks import EventError, check_key, decode_value, encode_value
from .limits import (
    COLUMNS_TYPE,
    MAX_BATCH_EVENTS,
    MAX_METRICS_PER_EVENT,
    MAX_STEP,
    MAX_TS,
    SCHEMA_VERSION,
    SYSTEM_PREFIX,
    TIMESTAMP_KEY,
)

# A batch holding at least this many metrics events of one (run, segment) carries them as columns.
MIN_COLUMN_ROWS: Final = 32
_FLOAT_OR_NULL: Final = frozenset({float, type(None)})
_NUMBER: Final = frozenset({float, int})


def columns_body(e: Mapping[str, Any]) -> dict[str, Any]:
    """The body of a ``metrics_columns`` event checked: steps (ints), times (floats) and each
    key's column (floats, NaN included, and None where the row does not log the key)."""
    steps = e.get("steps")
    if not isinstance(steps, list) or not steps:
        raise EventError("steps", "must be a non-empty list of steps")
    n = len(steps)
    if n > MAX_BATCH_EVENTS:
        raise EventError("steps", f"holds {n} rows, more than {MAX_BATCH_EVENTS}")
    if not set(map(type, steps)) <= {int}:
        i = next(i for i, s in enumerate(steps) if type(s) is not int)
        raise EventError(f"steps.{i}", f"must be an integer, got {type(steps[i]).__name__}")
    if min(steps) < 0 or max(steps) > MAX_STEP:
        i = next(i for i, s in enumerate(steps) if not 0 <= s <= MAX_STEP)
        raise EventError(f"steps.{i}", f"must be an integer in [0, {MAX_STEP}]")
    times = e.get("times")
    if not isinstance(times, list) or len(times) != n:
        raise EventError("times", f"must be a list of {n} times, one per step")
    kinds = set(map(type, times))
    if not kinds <= _NUMBER or min(times) < 0 or max(times) > MAX_TS or sum(times) != sum(times):
        i = next(i for i, t in enumerate(times) if type(t) not in _NUMBER or not 0 <= t <= MAX_TS)
        raise EventError(f"times.{i}", f"must be a number of seconds since the epoch in [0, {MAX_TS:.0f}]")
    if int in kinds:
        times = list(map(float, times))
    raw = e.get("values")
    if not isinstance(raw, dict) or not raw:
        raise EventError("values", "must be a non-empty JSON object of metric name -> list of values")
    if len(raw) > MAX_METRICS_PER_EVENT:
        raise EventError("values", f"holds {len(raw)} keys, more than {MAX_METRICS_PER_EVENT}")
    values: dict[str, list[float | None]] = {}
    for key, column in raw.items():
        check_key(key, "values")
        if key == TIMESTAMP_KEY or key.startswith(SYSTEM_PREFIX):
            raise EventError(f"values.{key}", "is not taken in columns (reserved, or a system metric: send it as a "
                                              "metrics event)")
        if not isinstance(column, list) or len(column) != n:
            raise EventError(f"values.{key}", f"must be a list of {n} values, one per step (null: not logged)")
        if not set(map(type, column)) <= _FLOAT_OR_NULL:
            column = [None if v is None else decode_value(v, f"values.{key}.{i}") for i, v in enumerate(column)]
        values[key] = column
    if any(None in column for column in values.values()):
        for key, column in values.items():
            if column.count(None) == n:
                raise EventError(f"values.{key}", "logs no value (every entry is null)")
        columns = list(values.values())
        for i in range(n):
            if all(column[i] is None for column in columns):
                raise EventError(f"steps.{i}", "this row logs no value (every column is null)")
    return {"steps": steps, "times": times, "values": values}


def event_count(events: list[dict[str, Any]]) -> int:
    """How many metrics and other events a batch stands for (each row of a columnar event one)."""
    return len(events) + sum(len(e["steps"]) - 1 for e in events if e["type"] == COLUMNS_TYPE)


def points(event: Mapping[str, Any]) -> int:
    """The points a validated event carries (0 for every type but metrics and metrics_columns)."""
    kind = event["type"]
    if kind == "metrics":
        return len(event["values"])
    if kind == COLUMNS_TYPE:
        n = len(event["steps"])
        return sum(n - column.count(None) for column in event["values"].values())
    return 0


def present(steps: list[int], column: list[Any]) -> tuple[list[int], list[Any]]:
    """The steps and values of the rows that log this column (all of them when it holds no null)."""
    if None not in column:
        return steps, column
    mask = list(map(is_not, column, [None] * len(column)))
    return list(compress(steps, mask)), list(compress(column, mask))


def encode_columns(wire: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """``wire`` with the metrics events of each (run, segment) that has at least ``MIN_COLUMN_ROWS`` of
    them carried as one ``metrics_columns`` event, put where the first of them was; the rest as is."""
    groups: dict[tuple[str, str], list[int]] = {}
    for i, e in enumerate(wire):
        if e["type"] == "metrics" and not _system(e):
            groups.setdefault((e["run"], e["segment"]), []).append(i)
    dense = {tuple(idx) for idx in groups.values() if len(idx) >= MIN_COLUMN_ROWS}
    if not dense:
        return wire
    first = {idx[0]: idx for idx in dense}
    taken = {i for idx in dense for i in idx}
    out: list[dict[str, Any]] = []
    for i, e in enumerate(wire):
        if i in first:
            out.append(_columnar([wire[j] for j in first[i]]))
        elif i not in taken:
            out.append(e)
    return out


def _system(e: Mapping[str, Any]) -> bool:
    return any(k.startswith(SYSTEM_PREFIX) for k in e["values"])


def _columnar(group: list[dict[str, Any]]) -> dict[str, Any]:
    head = group[0]
    return columns_event(head["run"], head["segment"], head["seq"], [e["step"] for e in group],
                         [e["ts"] for e in group], column_values([e["values"] for e in group]))


def column_values(rows: list[Mapping[str, Any]]) -> dict[str, list[Any]]:
    """Each key's column of ``rows`` (one mapping of key -> value a row), None where a row lacks the key."""
    keys = rows[0].keys()
    if all(row.keys() == keys for row in rows):  # the dense case: every row logs the same keys
        return {k: [row[k] for row in rows] for k in keys}
    values: dict[str, list[Any]] = {}
    for i, row in enumerate(rows):
        for k, v in row.items():
            column = values.get(k)
            if column is None:
                column = values[k] = [None] * len(rows)
            column[i] = v
    return values


def wire_columns(values: dict[str, list[Any]]) -> dict[str, list[Any]]:
    """Columns of floats (and None) as they travel: a non-finite float as its string (``encode_value``)."""
    out: dict[str, list[Any]] = {}
    for key, column in values.items():
        if None not in column and isfinite(sum(column)):  # the usual case: no call per value
            out[key] = column
        else:
            out[key] = [v if v is None else encode_value(v) for v in column]
    return out


def columns_event(run: str, segment: str, seq: int, steps: list[Any], times: list[Any],
                  values: dict[str, list[Any]]) -> dict[str, Any]:
    """The ``metrics_columns`` event of rows numbered from ``seq`` (``values`` in wire form)."""
    return {"v": SCHEMA_VERSION, "type": COLUMNS_TYPE, "run": run, "segment": segment, "seq": seq,
            "ts": times[0], "steps": steps, "times": times, "values": values}


def expand_columns(wire: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Wire events with each ``metrics_columns`` event back as its metrics events (seq numbered from the
    columnar event's): how the SDK reads a spooled body again."""
    if not any(e.get("type") == COLUMNS_TYPE for e in wire if isinstance(e, dict)):
        return wire
    out: list[dict[str, Any]] = []
    for e in wire:
        if not isinstance(e, dict) or e.get("type") != COLUMNS_TYPE:
            out.append(e)
            continue
        columns = e["values"].items()
        for i, (step, ts) in enumerate(zip(e["steps"], e["times"], strict=True)):
            out.append({"v": e.get("v", SCHEMA_VERSION), "type": "metrics", "run": e["run"], "segment": e["segment"],
                        "seq": e["seq"] + i, "ts": ts, "step": step,
                        "values": {k: column[i] for k, column in columns if column[i] is not None}})
    return out


def encode_columns_event(event: Mapping[str, Any]) -> dict[str, Any]:
    """A validated ``metrics_columns`` event back in wire form (non-finite values as strings)."""
    return {**event, "values": {k: [None if v is None else encode_value(v) for v in column]
                                for k, column in event["values"].items()}}
