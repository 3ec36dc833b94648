"""Worker scaling: a backlog of several runs' batches, drained by one worker, then by two.

    .venv/bin/python bench/worker_drain.py --runs 2 --batches 12 --workers 1 --workers 2 --rounds 2

PostgreSQL, Redis and one ``runcast serve`` (durable settings, as ``bench/backbone.py``), and
no worker at first: the API accepts ``--runs`` runs x ``--batches`` batches of 5000 steps x
8 floats, posted one run after the other in turn, so the queue holds the runs interleaved.
Then N workers start (``runcast worker --pool solo``). The clock runs from the moment the
last of them reports ready until every point is committed; points that workers ready
earlier committed before that moment are left out of the rate.

This is the worker's side of ingest on its own: the API and the SDK are idle while it runs,
as they would be on cores of their own. A run's batches are stored one after another under
its row lock, so a second worker can only take another run's batch: ``--runs 1`` shows that.
Printed per worker count: points/s (median of the rounds), the speed-up over the first
count, CPU µs per point of the workers and of PostgreSQL, and the load average.
"""

from __future__ import annotations

import argparse
import math
import os
import statistics
import sys
import time
from contextlib import ExitStack
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))
sys.path.insert(0, str(ROOT / "bench"))

import httpx  # noqa: E402
import psycopg  # noqa: E402
import services  # noqa: E402
from backbone import KEYS, Stack, _tree_cpu  # noqa: E402
from integration.helpers import WireRun  # noqa: E402
from runcast.wire import events as ev  # noqa: E402

STEPS_PER_BATCH = 5000


def fill(stack: Stack, runs: int, batches: int) -> list[str]:
    """Post every run's batches through the API, the runs in turn; returns the run ids."""
    wires = [WireRun("bench", f"drain-{n}") for n in range(runs)]
    values = [{k: math.sin(i * 0.01 + j) for j, k in enumerate(KEYS)} for i in range(1024)]
    headers = {"Authorization": f"Bearer {stack.token}", "Content-Type": "application/json"}
    with httpx.Client(timeout=120, headers=headers) as client:
        for b in range(batches):
            for wire in wires:
                steps = range(b * STEPS_PER_BATCH, (b + 1) * STEPS_PER_BATCH)
                batch = ([wire.started()] if b == 0 else []) + [wire.metrics(s, values[s & 1023]) for s in steps]
                for start in range(0, len(batch), ev.MAX_BATCH_EVENTS):  # the run_started makes one batch 5001
                    r = client.post(f"{stack.api_url}/api/v1/ingest", content=ev.dumps_batch(batch[start:start + ev.MAX_BATCH_EVENTS]))
                    r.raise_for_status()
    return [w.run for w in wires]


def committed(conn: psycopg.Connection, run_ids: list[str]) -> int:
    """The runs' logged points committed (not the server's own step times)."""
    row = conn.execute("SELECT coalesce(sum(count), 0) FROM series WHERE run_id = ANY(%s) AND key <> %s",
                       (run_ids, ev.TIMESTAMP_KEY)).fetchone()
    return int(row[0]) if row else 0


def drain(stack: Stack, run_ids: list[str], expected: int, workers: int, timeout: float) -> dict[str, Any]:
    """Start ``workers`` workers on the filled queue; time the drain once all of them are ready."""
    with ExitStack() as stop, psycopg.connect(stack.libpq(), autocommit=True) as conn:
        procs = []
        for n in range(workers):
            proc = services.Process(f"drain{n}", services.worker_argv(1, "solo", f"drain{n}-{os.getpid()}@%h"),
                                    services.child_env(stack.env), stack.logs / f"drain-{len(run_ids)}-{workers}-{n}.log")
            stop.callback(proc.stop)
            procs.append(proc)
        services.wait_until(lambda: all(p.check_alive("starting") or " ready." in p.output() for p in procs), 120,
                            "the workers to report ready", interval=0.02)
        begin, load0 = time.perf_counter(), os.getloadavg()[0]
        cpu0 = sum(_tree_cpu(p.pid) for p in procs), _tree_cpu(stack.pg_pid or 0)
        before = committed(conn, run_ids)
        seen = before
        while seen < expected and time.perf_counter() - begin < timeout:
            time.sleep(0.01)
            seen = committed(conn, run_ids)
        elapsed = time.perf_counter() - begin
        cpu1 = sum(_tree_cpu(p.pid) for p in procs), _tree_cpu(stack.pg_pid or 0)
    if seen != expected:
        raise RuntimeError(f"{seen} of {expected} points committed after {timeout:.0f} s")
    drained = expected - before
    return {"points_per_s": drained / elapsed, "drained": drained, "seconds": elapsed,
            "worker_us": (cpu1[0] - cpu0[0]) / drained * 1e6, "pg_us": (cpu1[1] - cpu0[1]) / drained * 1e6,
            "load": (load0, os.getloadavg()[0])}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=2, help="runs in the backlog")
    parser.add_argument("--batches", type=int, default=12, help="batches of 5000 steps x 8 per run")
    parser.add_argument("--workers", type=int, action="append", help="worker counts to compare (repeatable)")
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--pg-shared-buffers", default="256MB")
    args = parser.parse_args()
    counts = args.workers or [1, 2]
    stack_args = argparse.Namespace(pg_url=None, pg_test_settings=False, pg_shared_buffers=args.pg_shared_buffers,
                                    redis_url=None, api_url=None, no_worker=True, workers=0, pool="solo")
    expected = args.runs * args.batches * STEPS_PER_BATCH * len(KEYS)
    results: dict[int, list[dict[str, Any]]] = {n: [] for n in counts}
    print(f"{args.runs} run(s) x {args.batches} batches x {STEPS_PER_BATCH} steps x {len(KEYS)} floats = "
          f"{expected:,} points per drain; load at start {os.getloadavg()}", flush=True)
    with ExitStack() as exits:
        stack = Stack(stack_args, exits)
        for r in range(args.rounds):
            for n in counts:
                run_ids = fill(stack, args.runs, args.batches)
                res = drain(stack, run_ids, expected, n, timeout=600)
                results[n].append(res)
                print(f"round {r + 1}, {n} worker(s): {res['points_per_s']:,.0f} points/s ({res['drained']:,} points in "
                      f"{res['seconds']:.2f} s), CPU us/point workers {res['worker_us']:.2f}, PostgreSQL {res['pg_us']:.2f} "
                      f"(load {res['load'][0]:.2f}-{res['load'][1]:.2f})", flush=True)
    base = statistics.median(x["points_per_s"] for x in results[counts[0]])
    print(f"\n| workers | points/s (median of {args.rounds}) | speed-up | CPU µs/point: workers, PostgreSQL |")
    print("|--:|--:|--:|---|")
    for n, rs in results.items():
        med = statistics.median(x["points_per_s"] for x in rs)
        each = ", ".join(f"{x['points_per_s']:,.0f}" for x in rs)
        print(f"| {n} | {med:,.0f} ({each}) | {med / base:.2f}x | "
              f"{statistics.median(x['worker_us'] for x in rs):.2f}, {statistics.median(x['pg_us'] for x in rs):.2f} |")
    print(f"load at end {os.getloadavg()}")


if __name__ == "__main__":
    main()
