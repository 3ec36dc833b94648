"""A run's points from its export, as rows: ``{"_segment", "_step", "_timestamp", "_runtime", key:
value, ...}``, one per segment and step, in that order (a resumed run's abandoned steps stay under
their segment). ``_timestamp`` is the step's wall time as the server stores it (the export's ``time``
column, epoch seconds); ``_runtime`` is seconds since the run started (its ``started_at``, else its
first step time); a step without a time has neither.

The points come as Parquet (``GET /runs/{id}/export?format=parquet``) when pyarrow is installed,
else as JSONL; rows become a pandas DataFrame when pandas is installed and wanted. Neither is
required: they are imported on use.
"""

from __future__ import annotations

import importlib
import importlib.util
import io
import json
from collections.abc import Iterable, Iterator
from typing import Any, Final

from runcast.query.client import Client

SEGMENT: Final = "_segment"
STEP: Final = "_step"
TIMESTAMP: Final = "_timestamp"
RUNTIME: Final = "_runtime"
SYSTEM_PREFIX: Final = "system/"

Row = dict[str, Any]
Point = tuple[int, str, int, float, float | None]  # segment, key, step, value, time


def installed(module: str) -> bool:
    """Whether ``module`` can be imported (without importing it)."""
    try:
        return importlib.util.find_spec(module) is not None
    except (ImportError, ValueError):  # a finder that refuses it, a module without a spec
        return False


def _requests(keys: list[str] | None) -> list[dict[str, str]]:
    """The export's query parameters: one request for every key, or one per named key."""
    return [{}] if keys is None else [{"key": k} for k in keys]


def parquet_table(client: Client, run_id: str, keys: list[str] | None) -> Any:
    """The run's points as one pyarrow Table (``segment, key, step, value``)."""
    pq = importlib.import_module("pyarrow.parquet")
    pa = importlib.import_module("pyarrow")
    # The key column as a dictionary (as Parquet stores it): no Python string per point.
    tables = [pq.read_table(io.BytesIO(client.content(f"/runs/{run_id}/export", format="parquet", **params)),
                            read_dictionary=["key"])
              for params in _requests(keys)]
    return (tables[0] if len(tables) == 1 else pa.concat_tables(tables)).unify_dictionaries()


def jsonl_points(client: Client, run_id: str, keys: list[str] | None) -> Iterator[Point]:
    """The run's points from the JSONL export, as it streams (by segment, key, step per request)."""
    for params in _requests(keys):
        with client.stream(f"/runs/{run_id}/export", format="jsonl", **params) as response:
            for line in response.iter_lines():
                if line:
                    p = json.loads(line)
                    yield p["segment"], p["key"], p["step"], float(p["value"]), p.get("time")  # "NaN", "Infinity" included


def rows_of(points: Iterable[Point]) -> list[Row]:
    """Points merged into rows, sorted by segment and step."""
    rows: dict[tuple[int, int], Row] = {}
    for segment, key, step, value, at in points:
        row = rows.get((segment, step))
        if row is None:
            row = rows[(segment, step)] = {SEGMENT: segment, STEP: step}
            if at is not None:
                row[TIMESTAMP] = at
        row[key] = value
    return [rows[k] for k in sorted(rows)]


def with_runtime(rows: Iterable[Row], start: float | None) -> Iterator[Row]:
    """Rows with ``_runtime`` (seconds since ``start``, else since the first row's time) beside ``_timestamp``."""
    for row in rows:
        at = row.get(TIMESTAMP)
        if at is not None:
            start = at if start is None else start
            row[RUNTIME] = at - start
        yield row


def frame_times(frame: Any, table: Any, start: float | None) -> Any:
    """``frame`` (of ``frame_of_table``) with ``_timestamp`` and ``_runtime`` columns from the table's
    ``time`` column (the same for every key of a step; NaN where a step has none)."""
    pd = importlib.import_module("pandas")
    if "time" not in table.column_names:  # a server from before step times
        return frame
    times = pd.DataFrame({SEGMENT: table.column("segment").to_numpy().astype("int64"),
                          STEP: table.column("step").to_numpy(), TIMESTAMP: table.column("time").to_numpy()})
    frame = frame.merge(times.drop_duplicates([SEGMENT, STEP]), on=[SEGMENT, STEP], how="left")
    stamps = frame[TIMESTAMP]
    frame[RUNTIME] = stamps - (stamps.dropna().iloc[0] if start is None and stamps.notna().any() else start)
    return frame


def segment_rows(points: Iterable[Point]) -> Iterator[Row]:
    """Rows of points that arrive segment by segment (one export request): each segment's rows
    are yielded, in step order, once the next segment begins; only one segment is held."""
    held: list[Point] = []
    for point in points:
        if held and point[0] != held[-1][0]:
            yield from rows_of(held)
            held = []
        held.append(point)
    yield from rows_of(held)


def wanted(keys: list[str] | None, known: list[str]) -> list[str] | None:
    """The keys to ask for: ``keys`` checked against the run's, or (None) every key but the
    system metrics (``None`` again when that is all of them: one request for the lot)."""
    if keys is not None:
        missing = [k for k in keys if k not in known]
        if missing:
            raise KeyError(f"the run has no metric {', '.join(map(repr, missing))} (its keys: {', '.join(known)})")
        return list(dict.fromkeys(keys))
    chosen = [k for k in known if not k.startswith(SYSTEM_PREFIX)]
    return None if len(chosen) == len(known) else chosen


def spaced(count: int, samples: int | None) -> list[int] | None:
    """Indices of ``samples`` rows spread evenly over ``count`` (first and last kept); None: all."""
    if samples is None or samples >= count:
        return None
    if samples < 1:
        raise ValueError(f"samples must be at least 1, got {samples}")
    if samples == 1:
        return [count - 1]
    return sorted({round(i * (count - 1) / (samples - 1)) for i in range(samples)})


def _series(table: Any) -> dict[str, tuple[Any, Any, Any]]:
    """Each key's ``(segments, steps, values)`` numpy arrays, sorted by segment and step, from a
    long Table whose rows come grouped by segment and key, in step order (the export's order;
    one export per key concatenated keeps it per key)."""
    np = importlib.import_module("numpy")
    pa = importlib.import_module("pyarrow")
    if table.num_rows == 0:
        return {}
    column = table.column("key")
    if pa.types.is_dictionary(column.type):
        chunks = table.unify_dictionaries().column("key").chunks  # one dictionary for every chunk
    else:
        chunks = [column.combine_chunks().dictionary_encode()]
    codes = np.concatenate([c.indices.to_numpy(zero_copy_only=False) for c in chunks])
    labels = chunks[0].dictionary.to_pylist()
    seg = table.column("segment").to_numpy().astype(np.int64)
    step, value = table.column("step").to_numpy(), table.column("value").to_numpy()
    cuts = np.flatnonzero((codes[1:] != codes[:-1]) | (seg[1:] != seg[:-1])) + 1
    pieces: dict[str, list[slice]] = {}
    for start, end in zip([0, *cuts.tolist()], [*cuts.tolist(), len(codes)]):
        pieces.setdefault(labels[codes[start]], []).append(slice(start, end))
    out = {}
    for key, parts in pieces.items():
        parts.sort(key=lambda p: int(seg[p.start]))
        out[key] = tuple(np.concatenate([a[p] for p in parts]) for a in (seg, step, value))
    return out


def frame_of_table(table: Any) -> Any:
    """A pandas DataFrame of a long points Table: ``_segment``, ``_step`` and a column per key
    (NaN where a key has no point at that step), sorted by segment and step. Keys logged at the
    same steps (the usual case) become columns as they are; others are aligned on the union."""
    np = importlib.import_module("numpy")
    pd = importlib.import_module("pandas")
    series = _series(table)
    if not series:
        return pd.DataFrame({SEGMENT: np.array([], np.int64), STEP: np.array([], np.int64)})
    (seg, step, _), *rest = series.values()
    if all(np.array_equal(s, seg) and np.array_equal(t, step) for s, t, _ in rest):
        return pd.DataFrame({SEGMENT: seg, STEP: step, **{k: v for k, (_, _, v) in series.items()}})
    index = {k: pd.MultiIndex.from_arrays([s, t], names=[SEGMENT, STEP]) for k, (s, t, _) in series.items()}
    union = pd.MultiIndex.from_arrays(
        [np.concatenate([s for s, _, _ in series.values()]), np.concatenate([t for _, t, _ in series.values()])],
        names=[SEGMENT, STEP],
    ).unique().sort_values()
    columns = {k: pd.Series(v, index=index[k]).reindex(union).to_numpy() for k, (_, _, v) in series.items()}
    frame = pd.DataFrame(columns, index=union).reset_index()
    return frame.astype({SEGMENT: np.int64, STEP: np.int64})


def rows_of_table(table: Any) -> list[Row]:
    """The rows of a long points Table, without pandas."""
    series = _series(table) if installed("numpy") else None
    if series:
        np = importlib.import_module("numpy")
        (seg, step, _), *rest = series.values()
        if all(np.array_equal(s, seg) and np.array_equal(t, step) for s, t, _ in rest):
            names = [SEGMENT, STEP, *series]
            columns = [seg.tolist(), step.tolist(), *(v.tolist() for _, _, v in series.values())]
            rows = [dict(zip(names, values)) for values in zip(*columns)]
            if "time" in table.column_names:
                at = {(s, t): a for s, t, a in zip(table.column("segment").to_pylist(), table.column("step").to_pylist(),
                                                    table.column("time").to_pylist()) if a is not None}
                for row in rows:
                    if (row[SEGMENT], row[STEP]) in at:
                        row[TIMESTAMP] = at[(row[SEGMENT], row[STEP])]
            return rows
    columns = table.to_pydict()
    times = columns.get("time") or [None] * table.num_rows
    return rows_of(zip(columns["segment"], columns["key"], columns["step"], columns["value"], times))


def frame_of_rows(rows: list[Row], keys: list[str]) -> Any:
    """A pandas DataFrame of rows, with the time columns and a column per key (NaN where absent)."""
    pd = importlib.import_module("pandas")
    return pd.DataFrame.from_records(rows, columns=[SEGMENT, STEP, TIMESTAMP, RUNTIME, *keys])
