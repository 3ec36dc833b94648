"""Issue 31's benchmark: 10^6 points logged, stored and read back, beside TensorBoard, in one sitting.

    .venv/bin/python bench/million_points.py [--scale 1] [--only embedded production tensorboard finish]

Two series of 10^6 points (times ``--scale``): 1 key a step x 10^6 steps, and 8 keys a step x
125,000 steps. For each, one row per writer:

- Runcast embedded (``runcast serve``, SQLite, a fresh data dir) and Runcast in production mode
  with one worker (PostgreSQL, Redis, one Celery worker, the API: real processes on free
  loopback ports in a temp dir, ``bench/backbone.py``'s ``Stack``, durable settings). The SDK
  (defaults, but ``max_queue`` larger than the series and system metrics off) logs in a tight
  loop in a child process (``bench/embedded_ingest.py``'s client); "readable after" is the time
  from ``finish()`` returning until the run's Parquet export (a public read) holds every point,
  counted exactly (production stores after the 202, so it reads again until all are there).
- TensorBoard's ``SummaryWriter`` (torch), the way trainers call it: ``add_scalar`` per key per
  step, then ``close()``; and TensorBoard's own event writer
  (``tensorboard.summary.writer.event_file_writer.EventFileWriter``, the record writer under
  ``SummaryWriter``) given one ready ``Event`` a step with every key's value, then ``close()``.
  Reading back is TensorBoard's ``EventAccumulator`` with no sampling (every scalar kept).

Then a row for ``finish()`` of 160,000 points (8 keys x 20,000 steps, embedded), the issue's
<= 0.5 s target. Prints the machine, the load average before and after, the versions, and one
markdown table: log loop (or write), ``finish()``/``close()``, readable after, total, points/s
(points / (log loop + finish)), and the whole history read back once more after it all is
stored (Runcast: the Parquet export, then the JSONL export, every row counted; TensorBoard:
its reader, the same time as "readable after").
"""

from __future__ import annotations

import argparse
import os
import platform
import sqlite3
import sys
import tempfile
import time
from contextlib import ExitStack
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
PYTHONPATH = os.pathsep.join(str(ROOT / p) for p in ("trainer", "backend", "tests"))
# This checkout's code in this process and in every process it starts (the Stack's too).
os.environ["PYTHONPATH"] = PYTHONPATH
sys.path[:0] = [str(ROOT / "bench"), *PYTHONPATH.split(os.pathsep)]

import services  # noqa: E402
from backbone import Stack  # noqa: E402
from embedded_ingest import key_names, readable_rows, run_client  # noqa: E402
from import_throughput import read_tensorboard  # noqa: E402

SERIES = ((1, 1_000_000), (8, 125_000))  # (keys a step, steps)
FINISH_POINTS = (8, 20_000)  # 160,000 points


def runcast_row(result: dict[str, Any], server: str, points: int) -> dict[str, float]:
    """The table's fields from ``run_client``'s timings, and the whole history read back once
    more (everything stored now): the Parquet export (rows counted) and JSONL (lines counted)."""
    import httpx

    begin = time.perf_counter()
    rows = readable_rows(server, result["run"])
    parquet = time.perf_counter() - begin
    lines = 0
    begin = time.perf_counter()
    with httpx.stream("GET", f"{server}/api/v1/runs/{result['run']}/export", timeout=600) as response:
        response.raise_for_status()
        for chunk in response.iter_bytes():
            lines += chunk.count(b"\n")
    jsonl = time.perf_counter() - begin
    if rows != points or lines != points:
        raise RuntimeError(f"read back {rows} Parquet rows and {lines} JSONL lines of {points} points")
    return {"log_s": result["log_s"], "finish_s": result["finish_s"], "readable_s": result["readable_s"],
            "total_s": result["seconds"] + result["readable_s"], "points_per_s": points / result["seconds"],
            "read_s": parquet, "jsonl_s": jsonl}


def embedded(keys: int, steps: int) -> dict[str, float]:
    """Runcast's embedded default, a fresh ``runcast serve`` and data dir."""
    env = {"PYTHONPATH": PYTHONPATH}
    with tempfile.TemporaryDirectory(prefix="rc-million-") as tmp:
        env["RUNCAST_DATA_DIR"] = str(Path(tmp) / "data")
        token = services.create_token(env, "bench")
        proc, base = services.start_api(env, Path(tmp) / "api.log", timeout=120)
        try:
            return runcast_row(run_client(env, base, token, steps, keys), base, keys * steps)
        finally:
            proc.stop(timeout=20)


def production(stack: Stack, keys: int, steps: int) -> dict[str, float]:
    """Runcast in production mode (the stack's API, one worker)."""
    result = run_client({"PYTHONPATH": PYTHONPATH}, stack.api_url, stack.token, steps, keys)
    return runcast_row(result, stack.api_url, keys * steps)


def summary_writer(logdir: Path, keys: int, steps: int) -> dict[str, float]:
    """torch's ``SummaryWriter``: ``add_scalar`` per key per step, ``close()``, then read back."""
    from torch.utils.tensorboard import SummaryWriter

    names = key_names(keys)
    values = [[2.0 + ((i * 7 + j) % 101) * 0.01 for j in range(keys)] for i in range(1024)]
    begin = time.perf_counter()
    writer = SummaryWriter(str(logdir / "run"))
    add = writer.add_scalar
    for step in range(steps):
        row = values[step & 1023]
        for j, name in enumerate(names):
            add(name, row[j], step)
    logged = time.perf_counter()
    writer.close()
    return tensorboard_row(logdir, begin, logged, keys * steps)


def event_writer(logdir: Path, keys: int, steps: int) -> dict[str, float]:
    """TensorBoard's ``EventFileWriter``: one ``Event`` a step holding every key, ``close()``, then read back."""
    from tensorboard.compat.proto.event_pb2 import Event
    from tensorboard.compat.proto.summary_pb2 import Summary
    from tensorboard.summary.writer.event_file_writer import EventFileWriter

    names = key_names(keys)
    values = [[2.0 + ((i * 7 + j) % 101) * 0.01 for j in range(keys)] for i in range(1024)]
    begin = time.perf_counter()
    writer = EventFileWriter(str(logdir / "run"))
    for step in range(steps):
        row = values[step & 1023]
        summary = Summary(value=[Summary.Value(tag=name, simple_value=row[j]) for j, name in enumerate(names)])
        writer.add_event(Event(wall_time=time.time(), step=step, summary=summary))
    logged = time.perf_counter()
    writer.close()
    return tensorboard_row(logdir, begin, logged, keys * steps)


def tensorboard_row(logdir: Path, begin: float, logged: float, points: int) -> dict[str, float]:
    closed = time.perf_counter()
    rows = read_tensorboard(logdir)
    read = time.perf_counter() - closed
    if rows != points:
        raise RuntimeError(f"TensorBoard read {rows} of {points} points back")
    return {"log_s": logged - begin, "finish_s": closed - logged, "readable_s": read,
            "total_s": closed - begin + read, "points_per_s": points / (closed - begin), "read_s": read}


def versions() -> str:
    import tensorboard
    import torch
    from runcast import __version__ as runcast_version

    return (f"python {platform.python_version()}, SQLite {sqlite3.sqlite_version}, runcast {runcast_version}, "
            f"torch {torch.__version__}, tensorboard {tensorboard.__version__}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--scale", type=float, default=1.0, help="fraction of each series' steps (0.1: a quick check)")
    parser.add_argument("--only", nargs="+", choices=("embedded", "production", "tensorboard", "finish"),
                        default=["embedded", "production", "tensorboard", "finish"])
    args = parser.parse_args()
    print(f"machine: {platform.node()} {platform.machine()}, {os.cpu_count()} cores; {versions()}")
    print(f"load average before: {' '.join(f'{x:.2f}' for x in os.getloadavg())}", flush=True)
    rows: list[tuple[str, str, dict[str, float], float]] = []

    def add(series: str, writer: str, row: dict[str, float]) -> None:
        rows.append((series, writer, row, os.getloadavg()[0]))
        print(f"{series}, {writer}: " + ", ".join(f"{k} {v:,.2f}" for k, v in row.items()), flush=True)

    with ExitStack() as exits:
        stack = None
        if "production" in args.only:
            stack = Stack(argparse.Namespace(pg_url=None, pg_test_settings=False, pg_shared_buffers="256MB",
                                             redis_url=None, api_url=None, no_worker=False, workers=1, pool="solo"),
                          exits)
            print(f"production: {stack.pg_note}; one worker (solo pool)", flush=True)
        for keys, full_steps in SERIES:
            steps = max(1, round(full_steps * args.scale))
            series = f"{keys} key{'s' if keys > 1 else ''} x {steps:,} steps ({keys * steps:,} points)"
            if "embedded" in args.only:
                add(series, "Runcast embedded", embedded(keys, steps))
            if stack is not None:
                add(series, "Runcast production, 1 worker", production(stack, keys, steps))
            if "tensorboard" in args.only:
                for name, write in (("TensorBoard SummaryWriter", summary_writer), ("TensorBoard EventFileWriter", event_writer)):
                    with tempfile.TemporaryDirectory(prefix="rc-million-tb-") as tmp:
                        add(series, name, write(Path(tmp), keys, steps))
    if "finish" in args.only:
        keys, steps = FINISH_POINTS
        add(f"finish() of {keys * steps:,} points ({keys} keys x {steps:,} steps)", "Runcast embedded", embedded(keys, steps))
    print(f"\nload average after: {' '.join(f'{x:.2f}' for x in os.getloadavg())}\n")
    print("| series | writer | log loop / writes s | finish() / close() s | readable after s | total s | points/s "
          "| read back s (Parquet / reader) | JSONL s | load (1 min) |")
    print("|---|---|--:|--:|--:|--:|--:|--:|--:|--:|")
    for series, writer, row, load in rows:
        jsonl = f"{row['jsonl_s']:.2f}" if "jsonl_s" in row else "-"
        print(f"| {series} | {writer} | {row['log_s']:.2f} | {row['finish_s']:.2f} | {row['readable_s']:.2f} "
              f"| {row['total_s']:.2f} | {row['points_per_s']:,.0f} | {row['read_s']:.2f} | {jsonl} | {load:.2f} |")


if __name__ == "__main__":
    main()
