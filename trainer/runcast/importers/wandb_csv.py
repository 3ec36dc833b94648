"""The CSV a W&B line chart exports (panel menu -> Export -> CSV).

Columns: ``Step``, then ``<run> - <metric>`` for every run on the chart, each possibly
followed by ``<run> - <metric>__MIN`` and ``__MAX`` (the extremes of W&B's sampling
buckets). One Runcast run per ``<run>``; its metric is the plain column, the
``__MIN``/``__MAX`` columns are left out. A name is split at its last `` - ``. Empty
cells are steps the run did not log. A ``<run> - _timestamp`` column (a chart of W&B's
``_timestamp``) gives that run's step times (each metrics event's ``ts``), never a metric;
without one the export carries no times. It carries no config.

The run's identity is its W&B name, so the CSVs of several charts of the same runs
fill the same Runcast runs (each chart adds its metric).
"""

from __future__ import annotations

import csv
import math
from pathlib import Path
from typing import Final

from runcast.importers.model import ImportFailed, RunBuilder, SourceRun
from runcast.wire.events import TIMESTAMP_KEY

NAME: Final = "wandb-csv"
STEP_COLUMN: Final = "Step"
_SEPARATOR: Final = " - "
_BUCKET_SUFFIXES: Final = ("__MIN", "__MAX")


def looks_like(fields: list[str] | None) -> bool:
    return fields is not None and STEP_COLUMN in fields and any(_SEPARATOR in f for f in fields)


def read(path: Path) -> list[SourceRun]:
    try:
        with open(path, newline="", encoding="utf-8-sig") as f:
            reader = csv.reader(f)
            header = next(reader, None)
            if not looks_like(header):
                raise ImportFailed(f"{path}:1", f"a W&B chart export has a {STEP_COLUMN!r} column and '<run> - <metric>' columns")
            assert header is not None
            step_at = header.index(STEP_COLUMN)
            columns: list[tuple[int, str, str]] = []  # (index, run, metric)
            clocks: dict[str, int] = {}  # run -> index of its ``_timestamp`` column: the steps' times
            for i, name in enumerate(header):
                if _SEPARATOR in name and not name.endswith(_BUCKET_SUFFIXES):
                    run_name, metric = name.rsplit(_SEPARATOR, 1)
                    if metric == TIMESTAMP_KEY:
                        clocks[run_name] = i
                    else:
                        columns.append((i, run_name, metric))
            builders: dict[str, RunBuilder] = {}
            for row in reader:
                where = f"{path}:{reader.line_num}"
                if not any(cell.strip() for cell in row):
                    continue
                if len(row) != len(header):
                    raise ImportFailed(where, f"{len(row)} cells where the header has {len(header)}")
                step = _step(row[step_at], where)
                for i, run_name, metric in columns:
                    cell = row[i].strip()
                    if not cell:
                        continue
                    try:
                        value = float(cell)
                    except ValueError:
                        raise ImportFailed(where, f"column {header[i]!r}: {cell!r} is not a number") from None
                    builder = builders.setdefault(run_name, RunBuilder())
                    try:
                        builder.add(metric, step, value, _time(row, clocks.get(run_name), where))
                    except ValueError as exc:
                        raise ImportFailed(where, f"column {header[i]!r}: {exc}") from None
    except UnicodeDecodeError as exc:
        raise ImportFailed(str(path), f"not UTF-8 text (byte {exc.start})") from None
    return [
        builder.build(
            format=NAME,
            identity=run_name,
            name=run_name,
            env={"imported_from": {"format": NAME, "file": path.name}},
        )
        for run_name, builder in builders.items()
    ]


def _time(row: list[str], at: int | None, where: str) -> float:
    """The row's ``<run> - _timestamp`` cell (epoch seconds) when the chart has one, else NaN."""
    cell = row[at].strip() if at is not None else ""
    if not cell:
        return math.nan
    try:
        return float(cell)
    except ValueError:
        raise ImportFailed(where, f"{cell!r} is not a time in seconds since the epoch") from None


def _step(cell: str, where: str) -> int:
    try:
        value = float(cell)
    except ValueError:
        raise ImportFailed(where, f"{STEP_COLUMN!r} {cell!r} is not a number") from None
    if not value.is_integer():
        raise ImportFailed(where, f"{STEP_COLUMN!r} {cell!r} is not a whole number")
    return int(value)
