"""``runcast.Api``: a run's whole history as a pandas DataFrame, end to end.

    .venv/bin/python bench/api_history.py [--shapes 1x1000000 4x250000] [--repeat 3] [--data-dir DIR]

For each shape KEYSxSTEPS (10^6 points each by default) a run is logged once through the real
ingest path (the SDK's ``run.log`` into an embedded ``runcast serve``, SQLite; kept under
``--data-dir`` for later rounds), then timed: ``api.run(id).history()`` (the Parquet export
downloaded over loopback, read by pyarrow, made a pandas DataFrame with a column per key) and, for
where the time goes, its parts measured alone (download; ``pyarrow.parquet.read_table``; the
Table made a DataFrame) and ``history(pandas=False)`` (a list of dicts). Every call's row and point count is
checked. Median of ``--repeat``; prints a markdown table with the server's and the client's
CPU seconds and the load average.
"""

from __future__ import annotations

import argparse
import io
import json
import math
import os
import platform
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))


def loadavg() -> str:
    return " ".join(Path("/proc/loadavg").read_text().split()[:3])


def cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def log_run(server: str, token: str, keys: int, steps: int) -> tuple[str, float]:
    """A run of ``keys`` metrics x ``steps`` steps, logged with the SDK; (its id, seconds)."""
    import runcast

    names = [f"train/m{k}" for k in range(keys)]
    started = time.perf_counter()
    with tempfile.TemporaryDirectory() as spool:
        run = runcast.init("bench", f"history-{keys}x{steps}", server=server, token=token, spool_dir=spool,
                           capture_code=False, system_metrics=False, heartbeat_interval=3600,
                           max_queue=steps + 10)
        for step in range(steps):
            run.log({n: math.sin(step * 1e-3 + k) + 2.0 for k, n in enumerate(names)}, step=step)
        run.finish(timeout=3600)
    return run.id, time.perf_counter() - started


def median(fn: Any, repeat: int) -> tuple[float, Any]:
    """The median of ``repeat`` timed calls of ``fn`` (seconds) and the last call's result."""
    times, out = [], None
    for _ in range(repeat):
        started = time.perf_counter()
        out = fn()
        times.append(time.perf_counter() - started)
    return statistics.median(times), out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--shapes", nargs="+", default=["1x1000000", "4x250000"])
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--data-dir", type=Path, default=Path(tempfile.gettempdir()) / "runcast-bench-api-history")
    args = parser.parse_args()

    import httpx
    import pyarrow.parquet as pq
    import runcast
    import services
    from runcast.query import history

    args.data_dir.mkdir(parents=True, exist_ok=True)
    env = {"RUNCAST_DATA_DIR": str(args.data_dir / "data")}
    made_path = args.data_dir / "runs.json"
    made: dict[str, Any] = json.loads(made_path.read_text()) if made_path.exists() else {}
    if "token" not in made:
        made = {"token": services.create_token(env, "bench")}
    proc, server = services.start_api(env, args.data_dir / "api.log", timeout=120)
    print(f"machine: {platform.node()} {platform.machine()}, {os.cpu_count()} cores; python "
          f"{platform.python_version()}; pandas {__import__('pandas').__version__}, pyarrow "
          f"{__import__('pyarrow').__version__}")
    try:
        for shape in args.shapes:
            if shape not in made:
                keys, steps = map(int, shape.split("x"))
                run_id, seconds = log_run(server, made["token"], keys, steps)
                made[shape] = run_id
                made_path.write_text(json.dumps(made))
                print(f"logged {shape} ({keys * steps:,} points) through the SDK in {seconds:.1f} s")
        print(f"\nload average before: {loadavg()}\n")
        print("| keys x steps | points | history() s | points/s | download s | read_table s | to DataFrame s "
              "| pandas=False s | server CPU s | client CPU s | load (1 min) |")
        print("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
        auth = {"Authorization": f"Bearer {made['token']}"}
        with runcast.Api(server, made["token"]) as api:
            for shape in args.shapes:
                keys, steps = map(int, shape.split("x"))
                points = keys * steps
                server_cpu, client_cpu = cpu_seconds(proc.pid), time.process_time()
                seconds, df = median(lambda s=shape: api.run(made[s]).history(), args.repeat)
                server_cpu, client_cpu = cpu_seconds(proc.pid) - server_cpu, time.process_time() - client_cpu
                metric_columns = [c for c in df.columns if not c.startswith("_")]  # not _segment, _step, _timestamp, _runtime
                assert len(df) == steps and len(metric_columns) == keys
                assert int(df[metric_columns].notna().sum().sum()) == points and df["_timestamp"].notna().all()
                run = api.run(made[shape])  # the parts, alone
                url = f"{server}/api/v1/runs/{run.id}/export?format=parquet"
                download_s, body = median(lambda u=url: httpx.get(u, headers=auth, timeout=600).content, args.repeat)
                read_s, table = median(lambda b=body: pq.read_table(io.BytesIO(b), read_dictionary=["key"]),
                                     args.repeat)
                frame_s, _ = median(lambda t=table: history.frame_of_table(t), args.repeat)
                rows_s, rows = median(lambda r=run: r.history(pandas=False), 1)
                assert len(rows) == steps
                print(f"| {shape.replace('x', ' x ')} | {points:,} | **{seconds:.2f}** | {points / seconds:,.0f} "
                      f"| {download_s:.2f} | {read_s:.2f} | {frame_s:.2f} | {rows_s:.2f} "
                      f"| {server_cpu / args.repeat:.2f} | {client_cpu / args.repeat:.2f} "
                      f"| {loadavg().split()[0]} |", flush=True)
    finally:
        proc.stop()


if __name__ == "__main__":
    main()
