"""Embedded ingest (``runcast serve``, SQLite, storage inside the request), end to end.

    .venv/bin/python bench/embedded_ingest.py --checkout /work/main --checkout . --rounds 3

Each repeat starts a fresh embedded ``runcast serve`` (its own data dir) with the code of
one checkout (``PYTHONPATH`` = its trainer, backend and tests), then logs ``--steps``
steps x ``--keys`` floats (7 by default) in a tight loop with the SDK (default batch size,
a queue larger than the run, system metrics off), calls ``finish()`` and reads every point
back through the API (the run's Parquet export, rows counted). With several ``--checkout``,
each round runs them in turn, so a change in the machine's load hits every arm alike.
Printed per repeat: points/s from the first ``log()`` to ``finish()`` returning (every point
is then stored: the embedded API stores a batch before its 202; the stored and the read
counts are checked), the log loop and the share of steps sent during it, ``finish()``, the time until every point was read after
it, the total, the server's and the SDK process's CPU µs per point, and the load average.

    .venv/bin/python bench/embedded_ingest.py --checkout . --rounds 1 --steps 1000000 --keys 1
"""

from __future__ import annotations

import argparse
import json
import os
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
KEYS = ("train/loss", "train/lr", "train/grad_norm", "train/tokens", "perf/mfu", "perf/step_s", "val/loss")


def client(args: argparse.Namespace) -> None:
    """The SDK side (a child process with the checkout's SDK): log, finish, print timings as JSON."""
    import math

    import httpx  # noqa: F401 - the read-back's imports, loaded before the clock
    import pyarrow.parquet  # noqa: F401
    import runcast

    keys = key_names(args.keys)
    values = [{k: math.sin(i * 0.01 + j) + 2.0 for j, k in enumerate(keys)} for i in range(1024)]
    with tempfile.TemporaryDirectory() as spool:
        run = runcast.init("bench", "embedded-ingest", server=args.server, token=args.token, spool_dir=spool,
                           capture_code=False, heartbeat_interval=3600, max_queue=args.steps + 10,
                           system_metrics=False)
        begin, cpu0 = time.perf_counter(), time.process_time()
        log = run.log
        for step in range(args.steps):
            log(values[step & 1023], step=step)
        logged = time.perf_counter()
        sent_at_logged = run.stats.sent
        run.finish(timeout=600)
        done, cpu = time.perf_counter(), time.process_time() - cpu0
        rows = readable_rows(args.server, run.id, expected=args.steps * args.keys)
        readable = time.perf_counter()
        print(json.dumps({"run": run.id, "seconds": done - begin, "log_s": logged - begin, "finish_s": done - logged,
                          "readable_s": readable - done, "rows": rows, "sdk_cpu_s": cpu,
                          "spooled": run.stats.spooled, "sent_at_logged": sent_at_logged, "dropped": run.stats.dropped}))


def key_names(count: int) -> tuple[str, ...]:
    """``count`` metric names (the first seven are a trainer's usual ones)."""
    return (KEYS + tuple(f"extra/k{i}" for i in range(max(0, count - len(KEYS)))))[:count]


def readable_rows(server: str, run_id: str, expected: int = 0, timeout: float = 600) -> int:
    """Every point of the run read back through the API (the Parquet export, a public read), counted;
    read again until ``expected`` rows are there (production stores after the 202) or ``timeout``."""
    import io

    import httpx
    import pyarrow.parquet as pq

    deadline = time.perf_counter() + timeout
    while True:
        response = httpx.get(f"{server}/api/v1/runs/{run_id}/export", params={"format": "parquet"}, timeout=600)
        response.raise_for_status()
        rows = pq.read_metadata(io.BytesIO(response.content)).num_rows
        if rows >= expected or time.perf_counter() > deadline:
            return rows
        time.sleep(0.05)


def group_cpu_seconds(pgid: int) -> float:
    """utime + stime of every process in process group ``pgid`` (Linux /proc)."""
    tick = os.sysconf("SC_CLK_TCK")
    total = 0
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/stat") as f:
                    fields = f.read().rsplit(")", 1)[1].split()
            except OSError:
                continue
            if int(fields[2]) == pgid:
                total += int(fields[11]) + int(fields[12])
    return total / tick


def run_client(env: dict[str, str], server: str, token: str, steps: int, keys: int) -> dict[str, Any]:
    """Run the SDK side (``client``) in a child process with ``env``; its timings, or an error if a
    point was spooled, dropped or not read back."""
    sys.path.insert(0, str(ROOT / "tests"))
    import services

    out = subprocess.run([sys.executable, __file__, "--client", "--server", server, "--token", token,
                          "--steps", str(steps), "--keys", str(keys)], env=services.child_env(env), capture_output=True,
                         text=True)
    if out.returncode:
        raise RuntimeError(f"the SDK's side failed ({out.returncode}): {out.stderr[-3000:]}")
    result: dict[str, Any] = json.loads(out.stdout.strip().splitlines()[-1])
    if result["rows"] != steps * keys or result["spooled"] or result["dropped"]:
        raise RuntimeError(f"{result['rows']} of {steps * keys} points read: {result}")
    return result


def one(checkout: Path, steps: int, keys: int) -> dict[str, float]:
    sys.path.insert(0, str(ROOT / "tests"))
    import services

    env = {"PYTHONPATH": os.pathsep.join(str(checkout / p) for p in ("trainer", "backend", "tests"))}
    with tempfile.TemporaryDirectory() as tmp:
        env["RUNCAST_DATA_DIR"] = str(Path(tmp) / "data")
        token = services.create_token(env, "bench")
        proc, base = services.start_api(env, Path(tmp) / "api.log", timeout=120)
        try:
            load0 = os.getloadavg()[0]
            cpu0 = group_cpu_seconds(proc.pid)
            result = run_client(env, base, token, steps, keys)
            server_cpu = group_cpu_seconds(proc.pid) - cpu0
            load1 = os.getloadavg()[0]
        finally:
            proc.stop(timeout=20)
        db = next(Path(env["RUNCAST_DATA_DIR"]).rglob("*.db"))
        with sqlite3.connect(db) as conn:
            stored = conn.execute("SELECT count(*) FROM points p JOIN series s ON s.id = p.series_id "
                                  "WHERE s.run_id = ?", (result["run"],)).fetchone()[0]
    expected = steps * keys
    # the table also holds the steps' wall times (the ``_timestamp`` series), which the export leaves out
    if stored < expected or result["rows"] != expected or result["spooled"] or result["dropped"]:
        raise RuntimeError(f"{checkout}: {stored} stored, {result['rows']} of {expected} points read, {result}")
    return {"points_per_s": expected / result["seconds"], "finish_s": result["finish_s"],
            "log_s": result["log_s"], "readable_s": result["readable_s"],
            "total_s": result["seconds"] + result["readable_s"], "sent_in_loop": result["sent_at_logged"] / steps,
            "server_us_per_point": server_cpu / expected * 1e6, "sdk_us_per_point": result["sdk_cpu_s"] / expected * 1e6,
            "load0": load0, "load1": load1}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--checkout", type=Path, action="append", help="a checkout to measure (repeatable)")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--steps", type=int, default=20_000, help="steps per repeat")
    parser.add_argument("--keys", type=int, default=len(KEYS), help="floats logged a step")
    parser.add_argument("--client", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--server", help=argparse.SUPPRESS)
    parser.add_argument("--token", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.client:
        client(args)
        return
    checkouts = [c.resolve() for c in (args.checkout or [ROOT])]
    results: dict[Path, list[dict[str, float]]] = {c: [] for c in checkouts}
    print(f"{args.steps} steps x {args.keys} floats; load at start {os.getloadavg()}", flush=True)
    for r in range(args.rounds):
        for c in checkouts:
            res = one(c, args.steps, args.keys)
            results[c].append(res)
            print(f"round {r + 1} {c}: {res['points_per_s']:,.0f} points/s, log loop {res['log_s']:.2f} s, "
                  f"{res['sent_in_loop']:.0%} sent during it, finish() {res['finish_s']:.2f} s, readable {res['readable_s']:.2f} s later, "
                  f"total {res['total_s']:.2f} s, "
                  f"server {res['server_us_per_point']:.2f} CPU us/point, SDK {res['sdk_us_per_point']:.2f} (load {res['load0']:.2f}-{res['load1']:.2f})",
                  flush=True)
    for c, rs in results.items():
        med = {k: statistics.median(x[k] for x in rs)
               for k in ("points_per_s", "finish_s", "server_us_per_point", "sdk_us_per_point")}
        print(f"{c}: median {med['points_per_s']:,.0f} points/s ({[round(x['points_per_s']) for x in rs]}), "
              f"finish() {med['finish_s']:.2f} s, server {med['server_us_per_point']:.2f} CPU us/point, "
              f"SDK {med['sdk_us_per_point']:.2f}")
    print(f"load at end {os.getloadavg()}")


if __name__ == "__main__":
    main()
