"""A run's points from its export, as rows: ``{"_segment", "_step", key: value, ...}``, one per
segment and step, in that order (a resumed run's abandoned steps stay under their segment).
A column the export has beyond ``segment, key, step, value`` (a step's ``time``) is kept, one
value per row under its name with a leading underscore (``_time``): the first key's that has one.

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
SYSTEM_PREFIX: Final = "system/"
POINT_COLUMNS: Final = ("segment", "key", "step", "value")

Row = dict[str, Any]
Point = tuple[int, str, int, float, dict[str, Any]]  # segment, key, step, value, the export's other columns


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
                    extra = {k: v for k, v in p.items() if k not in POINT_COLUMNS}
                    yield p["segment"], p["key"], p["step"], float(p["value"]), extra  # "NaN", "Infinity" included


def rows_of(points: Iterable[Point]) -> list[Row]:
    """Points merged into rows, sorted by segment and step."""
    rows: dict[tuple[int, int], Row] = {}
    extras: dict[tuple[int, int], Row] = {}
    for segment, key, step, value, extra in points:
        row = rows.get((segment, step))
        if row is None:
            row = rows[(segment, step)] = {SEGMENT: segment, STEP: step}
            extras[(segment, step)] = {}
        row[key] = value
        held = extras[(segment, step)]
        for name, v in extra.items():
            if v is not None:
                held.setdefault(f"_{name}", v)
    return [{**rows[k], **extras[k]} for k in sorted(rows)]


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


def _extra_names(table: Any) -> list[str]:
    """The Table's columns beyond a point's own (``time``...)."""
    return [n for n in table.column_names if n not in POINT_COLUMNS]


def _first_present(arrays: list[Any]) -> Any:
    """Element-wise, the first of ``arrays`` (aligned) whose value is not missing (None or NaN)."""
    pd = importlib.import_module("pandas")
    out = pd.Series(arrays[0])
    for other in arrays[1:]:
        out = out.fillna(pd.Series(other)) if out.isna().any() else out
    return out.to_numpy()


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


def _series(table: Any) -> dict[str, tuple[Any, ...]]:
    """Each key's ``(segments, steps, values, *extras)`` numpy arrays (extras: ``_extra_names``),
    sorted by segment and step, from a
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
    extras = [table.column(n).to_numpy() for n in _extra_names(table)]
    cuts = np.flatnonzero((codes[1:] != codes[:-1]) | (seg[1:] != seg[:-1])) + 1
    pieces: dict[str, list[slice]] = {}
    for start, end in zip([0, *cuts.tolist()], [*cuts.tolist(), len(codes)]):
        pieces.setdefault(labels[codes[start]], []).append(slice(start, end))
    out = {}
    for key, parts in pieces.items():
        parts.sort(key=lambda p: int(seg[p.start]))
        out[key] = tuple(np.concatenate([a[p] for p in parts]) for a in (seg, step, value, *extras))
    return out


def frame_of_table(table: Any) -> Any:
    """A pandas DataFrame of a long points Table: ``_segment``, ``_step`` and a column per key
    (NaN where a key has no point at that step), sorted by segment and step. Keys logged at the
    same steps (the usual case) become columns as they are; others are aligned on the union."""
    np = importlib.import_module("numpy")
    pd = importlib.import_module("pandas")
    series = _series(table)
    extra = [f"_{n}" for n in _extra_names(table)]
    if not series:
        return pd.DataFrame({SEGMENT: np.array([], np.int64), STEP: np.array([], np.int64)})
    (seg, step, *_), *rest = series.values()
    if all(np.array_equal(s[0], seg) and np.array_equal(s[1], step) for s in rest):
        aligned = [s[3:] for s in series.values()]
    else:
        index = {k: pd.MultiIndex.from_arrays(s[:2], names=[SEGMENT, STEP]) for k, s in series.items()}
        union = pd.MultiIndex.from_arrays(
            [np.concatenate([s[0] for s in series.values()]), np.concatenate([s[1] for s in series.values()])],
            names=[SEGMENT, STEP],
        ).unique().sort_values()
        series = {k: (*s[:2], *(pd.Series(a, index=index[k]).reindex(union).to_numpy() for a in s[2:]))
                  for k, s in series.items()}
        seg, step = (union.get_level_values(i).to_numpy().astype(np.int64) for i in (0, 1))
        aligned = [s[3:] for s in series.values()]
    extras = {name: _first_present([a[i] for a in aligned]) for i, name in enumerate(extra)}
    return pd.DataFrame({SEGMENT: seg, STEP: step, **extras, **{k: s[2] for k, s in series.items()}})


def rows_of_table(table: Any) -> list[Row]:
    """The rows of a long points Table, without pandas."""
    series = _series(table) if installed("numpy") else None
    if series:
        np = importlib.import_module("numpy")
        (seg, step, *_), *rest = series.values()
        if not _extra_names(table) and all(np.array_equal(s[0], seg) and np.array_equal(s[1], step) for s in rest):
            names = [SEGMENT, STEP, *series]
            columns = [seg.tolist(), step.tolist(), *(s[2].tolist() for s in series.values())]
            return [dict(zip(names, values)) for values in zip(*columns)]
    columns = table.to_pydict()
    extra = _extra_names(table)
    extras = [dict(zip(extra, values)) for values in zip(*(columns[n] for n in extra))] if extra else None
    return rows_of(zip(columns["segment"], columns["key"], columns["step"], columns["value"],
                       extras if extras is not None else [{}] * table.num_rows))


def frame_of_rows(rows: list[Row], keys: list[str]) -> Any:
    """A pandas DataFrame of rows, with a column per key (NaN where absent)."""
    pd = importlib.import_module("pandas")
    return pd.DataFrame.from_records(rows, columns=[SEGMENT, STEP, *keys])
