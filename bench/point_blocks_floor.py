"""The floor under issue 31's targets: 10^6 points of one series in SQLite as a row each (as
``points`` holds them) and as blocks (a series' values as one float64 array a row), written and
read back into a Parquet file. Nothing of Runcast runs here: this is what the storage alone costs.

    .venv/bin/python bench/point_blocks_floor.py [--points 1000000] [--block 4096] [--repeat 3]

Rows: ``executemany`` into a ``WITHOUT ROWID`` table keyed by (series, step), as ``points`` is;
read back by ``fetchall`` in step order, into Arrow. Blocks: one row per ``--block`` consecutive
steps (first step, count, values as bytes); read back with ``numpy.frombuffer``. Both in WAL
mode with ``synchronous=NORMAL`` (the embedded server's settings), a fresh file each repeat, the
Parquet file written as the export writes it (snappy, dictionary for the text column). Prints
the median of ``--repeat`` runs and checks that every value reads back bit for bit.
"""

from __future__ import annotations

import argparse
import io
import os
import platform
import sqlite3
import statistics
import tempfile
import time
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq


def connect(path: Path) -> sqlite3.Connection:
    conn = sqlite3.connect(path, isolation_level=None)
    conn.execute("PRAGMA journal_mode=WAL")
    conn.execute("PRAGMA synchronous=NORMAL")
    return conn


def parquet_bytes(steps: np.ndarray, values: np.ndarray) -> int:
    n = len(values)
    key = pa.DictionaryArray.from_arrays(pa.array(np.zeros(n, np.int32)), pa.array(["train/loss"]))
    table = pa.table({"segment": pa.array(np.zeros(n, np.int32)), "key": key, "step": steps, "value": values})
    sink = io.BytesIO()
    pq.write_table(table, sink, compression="snappy", use_dictionary=["segment", "key"])
    return len(sink.getvalue())


def written(path: Path, table: str, insert: str, params: Iterable[tuple[Any, ...]]) -> tuple[sqlite3.Connection, float]:
    """A fresh database with ``table`` (its DDL), and the seconds ``insert`` of ``params`` took in one transaction."""
    conn = connect(path)
    conn.execute(table)
    began = time.perf_counter()
    conn.execute("BEGIN")
    conn.executemany(insert, params)
    conn.execute("COMMIT")
    return conn, time.perf_counter() - began


def rows(path: Path, values: np.ndarray, _block: int) -> tuple[float, float, bool]:
    conn, wrote = written(
        path,
        "CREATE TABLE points (series_id BIGINT NOT NULL, step BIGINT NOT NULL, value FLOAT, "
        "PRIMARY KEY (series_id, step)) WITHOUT ROWID",
        "INSERT INTO points VALUES (1, ?, ?)",
        enumerate(values.tolist()),
    )
    began = time.perf_counter()
    read = conn.execute("SELECT step, value FROM points WHERE series_id = 1 ORDER BY step").fetchall()
    steps, back = pa.array(read, type=pa.struct([("step", pa.int64()), ("value", pa.float64())])).flatten()
    parquet_bytes(steps.to_numpy(), back.to_numpy())
    return wrote, time.perf_counter() - began, bool(np.array_equal(back.to_numpy(), values))


def blocks(path: Path, values: np.ndarray, block: int) -> tuple[float, float, bool]:
    conn, wrote = written(
        path,
        "CREATE TABLE blocks (series_id BIGINT NOT NULL, first_step BIGINT NOT NULL, n INTEGER NOT NULL, "
        "value BLOB NOT NULL, PRIMARY KEY (series_id, first_step)) WITHOUT ROWID",
        "INSERT INTO blocks VALUES (1, ?, ?, ?)",
        [(i, len(values[i : i + block]), values[i : i + block].tobytes()) for i in range(0, len(values), block)],
    )
    began = time.perf_counter()
    read = conn.execute("SELECT first_step, n, value FROM blocks WHERE series_id = 1 ORDER BY first_step").fetchall()
    back = np.concatenate([np.frombuffer(b, dtype=np.float64) for _, _, b in read])
    steps = np.concatenate([np.arange(first, first + n, dtype=np.int64) for first, n, _ in read])
    parquet_bytes(steps, back)
    return wrote, time.perf_counter() - began, bool(np.array_equal(back, values))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--points", type=int, default=1_000_000)
    parser.add_argument("--block", type=int, default=4096, help="points a block row holds")
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    rng = np.random.default_rng(31)
    values = 2.0 + 8.0 * np.exp(-np.arange(args.points) / (args.points / 20)) * (
        1 + 0.01 * rng.standard_normal(args.points)
    )
    layouts: dict[str, Callable[[Path, np.ndarray, int], tuple[float, float, bool]]] = {
        "a row a point": rows,
        f"blocks of {args.block}": blocks,
    }
    print(
        f"machine: {platform.machine()}, {os.cpu_count()} cores; SQLite {sqlite3.sqlite_version}, pyarrow {pa.__version__}; "
        f"load average {' '.join(f'{x:.2f}' for x in os.getloadavg())}"
    )
    print(f"\n| layout | write {args.points:,} points s | read back into Parquet s | exact |")
    print("|---|--:|--:|---|")
    for name, layout in layouts.items():
        runs = []
        for _ in range(args.repeat):
            with tempfile.TemporaryDirectory() as tmp:
                runs.append(layout(Path(tmp) / "floor.db", values, args.block))
        print(
            f"| {name} | {statistics.median(r[0] for r in runs):.3f} | {statistics.median(r[1] for r in runs):.3f} | "
            f"{all(r[2] for r in runs)} |"
        )


if __name__ == "__main__":
    main()
