"""The backbone benchmark: SDK cost, end-to-end ingest throughput and metrics query latency.

    .venv/bin/python bench/backbone.py              # full run (series up to 10^7 points)
    .venv/bin/python bench/backbone.py --quick      # a couple of minutes: small sizes
    .venv/bin/python bench/backbone.py --pg-url postgresql+psycopg://... --redis-url redis://...

Production mode, measured through the real processes:

(a) ``run.log()`` of 8 float scalars: mean and p99 in microseconds (the logic of
    ``bench/sdk_log_cost.py``), with a transport that discards batches and with the
    real API as the destination.
(b) End-to-end ingest: ``run.log()`` of ``--steps`` steps x 8 scalars in a tight loop,
    clock stopped when the last point is visible in PostgreSQL (``sum(series.count)``
    of the run, polled every 10 ms from another connection, so it only sees committed
    rows), over HTTP: SDK -> ``runcast serve`` (checks the batch, commits it to the ingest
    inbox, enqueues its id) -> Redis -> worker. ONE Celery worker process, ``--pool solo``
    (one process, one task at a time; the same as prefork with concurrency 1 minus
    the pool's parent process).
(c) ``GET /api/v1/runs/{id}/metrics?key=loss&max_points=2000`` through the real API,
    full range and a zoom on the middle 20%, for series of ``--sizes`` points. The
    series are written by ``store_batch`` itself (the ingest task's function, so
    points, rollups, series and run rows are exactly what ingest produces), in big
    batches of already-validated events to load 10^7 points in minutes.

Unless URLs are given, it starts a throwaway PostgreSQL 15 (with PostgreSQL's own,
durable defaults: fsync, synchronous_commit and full_page_writes on, as in
docker-compose.yml; ``--pg-test-settings`` uses the test suite's fsync=off instead),
a redis-server, one worker and one API process with the helpers of ``tests/services.py``,
and stops them at the end. Every measurement is repeated (``--repeat``) and the
median printed, with the 1-minute load average seen during it: the numbers are only
as quiet as the machine.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import shutil
import statistics
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))  # services.py: the test suite's server helpers
sys.path.insert(0, str(ROOT / "bench"))

import httpx  # noqa: E402
import psycopg  # noqa: E402
import runcast  # noqa: E402
import sdk_log_cost  # noqa: E402
import services  # noqa: E402

KEYS = [f"train/m{k}" for k in range(8)]
QUERY_KEY = "loss"


# --- services -------------------------------------------------------------------------------


class DurablePostgres(services.PostgresServer):
    """``services.PostgresServer`` with PostgreSQL's default (durable) settings.

    The test helper turns fsync, synchronous_commit and full_page_writes off; a
    production benchmark must not. Only the server options differ.
    """

    def __init__(self, extra: list[str]) -> None:
        super().__init__()
        self.extra = extra

    def start(self) -> DurablePostgres:
        self._run(
            [self.initdb, "-D", str(self.data), "-U", "postgres", "-A", "trust", "-E", "UTF8", "--locale=C"],
            "initdb",
        )
        opts = " ".join(
            [
                "-c listen_addresses=127.0.0.1",
                f"-c port={self.port}",
                f"-c unix_socket_directories={self.sockets}",
                *self.extra,
            ]
        )
        services._SERVERS.append(self)
        self._run(
            [self.pg_ctl, "-D", str(self.data), "-l", str(self.log_path), "-w", "-t", "60", "-o", opts, "start"],
            "pg_ctl start",
        )
        self.started = True
        return self


class Stack:
    """PostgreSQL + Redis + one worker + one API, started here or given by URL."""

    def __init__(self, args: argparse.Namespace, exits: ExitStack) -> None:
        self.tmp = Path(tempfile.mkdtemp(prefix="runcast-backbone-"))
        self.logs = self.tmp / "logs"
        self.pg_pid: int | None = None
        self.redis_pid: int | None = None
        if args.pg_url:
            self.pg_url = args.pg_url
            self.pg_note = "given by --pg-url"
            self.pg_pid = self._local_postmaster()
        else:
            if args.pg_test_settings:
                pg = services.PostgresServer()
                self.pg_note = "throwaway PostgreSQL, TEST settings (fsync=off, synchronous_commit=off)"
            else:
                pg = DurablePostgres([f"-c shared_buffers={args.pg_shared_buffers}", "-c max_wal_size=4GB"])
                self.pg_note = (
                    f"throwaway PostgreSQL, durable defaults (fsync on, synchronous_commit on), "
                    f"shared_buffers={args.pg_shared_buffers}, max_wal_size=4GB"
                )
            pg.start()
            exits.callback(pg.stop)
            self.pg_url = pg.url()
            self.pg_pid = int((pg.data / "postmaster.pid").read_text().split()[0])
        if args.redis_url:
            self.redis_url = args.redis_url
        else:
            redis = services.RedisServer().start()
            exits.callback(redis.stop)
            self.redis_url = redis.url()
            self.redis_pid = redis.proc.pid if redis.proc else None
        from runcast_server.core import migrate

        migrate.upgrade(self.pg_url)
        self.env = {
            "RUNCAST_DATABASE_URL": self.pg_url,
            "RUNCAST_REDIS_URL": self.redis_url,
            "RUNCAST_DATA_DIR": str(self.tmp / "data"),
        }
        self.api_pid: int | None = None
        if args.api_url:
            self.api_url = args.api_url.rstrip("/")
        else:
            api, self.api_url = services.start_api(self.env, self.logs / "api.log")
            exits.callback(api.stop)
            self.api_pid = api.pid
        self.workers: list[services.Process] = []
        for n in range(0 if args.no_worker else args.workers):
            worker = services.start_worker(self.env, self.logs / f"worker{n}.log", pool=args.pool, name=f"worker{n}")
            exits.callback(worker.stop)
            self.workers.append(worker)
        self.worker = self.workers[0] if self.workers else None
        self.token = self._token()

    def _local_postmaster(self) -> int | None:
        """The postmaster's pid when the given PostgreSQL runs on this machine (for the CPU meter)."""
        try:
            with psycopg.connect(self.libpq()) as conn:
                backend = conn.execute("SELECT pg_backend_pid()").fetchone()[0]  # type: ignore[index]
                if b"postgres" not in Path(f"/proc/{backend}/cmdline").read_bytes():
                    return None  # a server elsewhere: its backend's pid means nothing here
                stat = Path(f"/proc/{backend}/stat").read_text()
            return int(stat.rsplit(")", 1)[1].split()[1])
        except (OSError, psycopg.Error, IndexError, ValueError):
            return None

    def _token(self) -> str:
        from runcast_server.core.auth import create_token
        from runcast_server.core.db import make_engine
        from sqlalchemy.orm import Session

        engine = make_engine(self.pg_url)
        with Session(engine) as session:
            token = create_token(session, "bench", "backbone")
            session.commit()
        engine.dispose()
        return token

    def libpq(self) -> str:
        return self.pg_url.replace("postgresql+psycopg://", "postgresql://", 1)


# --- measurement helpers --------------------------------------------------------------------


def pct(samples: list[float], q: float) -> float:
    s = sorted(samples)
    return s[min(len(s) - 1, int(q * len(s)))]


@contextmanager
def load_window(into: list[float]) -> Iterator[None]:
    """Record the 1-minute load average at the start and the end of a measurement."""
    into.append(os.getloadavg()[0])
    try:
        yield
    finally:
        into.append(os.getloadavg()[0])


def load_str(loads: list[float]) -> str:
    return f"{min(loads):.1f}-{max(loads):.1f}" if loads else "?"


def _proc_cpu(pid: int) -> float:
    """CPU seconds (user + system) of one process so far; 0 if it is gone."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except (FileNotFoundError, ProcessLookupError, IndexError):
        return 0.0
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _children(pid: int) -> list[int]:
    out = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                if int(Path(f"/proc/{entry}/stat").read_text().rsplit(")", 1)[1].split()[1]) == pid:
                    out.append(int(entry))
            except (FileNotFoundError, ProcessLookupError, IndexError, ValueError):
                pass
    return out


def _tree_cpu(pid: int) -> float:
    return _proc_cpu(pid) + sum(_proc_cpu(c) for c in _children(pid))


class CpuMeter:
    """CPU seconds spent by each component (a process and its children) over a window.

    Under a loaded machine throughput swings with the neighbours; CPU per point does
    not, so it is the number to compare before and after a change.
    """

    def __init__(self, stack: Stack) -> None:
        self.roots = {"sdk (this process)": os.getpid()}
        if stack.api_pid:
            self.roots["api"] = stack.api_pid
        self.workers = [w.pid for w in stack.workers]  # their CPU is summed as "worker"
        if stack.redis_pid:
            self.roots["redis"] = stack.redis_pid
        if stack.pg_pid:
            self.roots["postgres"] = stack.pg_pid

    def sample(self) -> dict[str, float]:
        out = {}
        for name, pid in self.roots.items():
            if name.startswith("sdk"):
                t = os.times()
                out[name] = t.user + t.system
            else:
                out[name] = _tree_cpu(pid)
        if self.workers:
            out["worker"] = sum(_tree_cpu(pid) for pid in self.workers)
        return out


# --- (a) SDK cost ---------------------------------------------------------------------------


def bench_log_cost(stack: Stack | None, calls: int, repeat: int) -> list[dict[str, Any]]:
    rows = []
    float_values = lambda i: float(i) * 0.5  # noqa: E731
    cases: list[tuple[str, Any, float]] = [
        ("null transport, tight loop", None, 0.0),
        ("null transport, 100 us between calls", None, 100.0),
    ]
    if stack is not None:
        cases.append(("http API, 100 us between calls", "api", 100.0))
    with tempfile.TemporaryDirectory() as spool:
        for label, dest, pace in cases:
            means, p99s, loads = [], [], []
            for _ in range(repeat):
                transport = sdk_log_cost.NullTransport() if dest is None else stack.api_url  # type: ignore[union-attr]
                token = stack.token if stack is not None else None
                with load_window(loads):
                    samples = sdk_log_cost.measure(float_values, calls, transport, token, spool, pace)
                means.append(statistics.fmean(samples))
                p99s.append(pct(samples, 0.99))
            rows.append(
                {
                    "what": f"log() of 8 floats: {label}",
                    "mean_us": statistics.median(means),
                    "p99_us": statistics.median(p99s),
                    "runs": [round(x, 2) for x in p99s],
                    "load": load_str(loads),
                }
            )
            print(f"  {rows[-1]['what']}: mean {rows[-1]['mean_us']:.2f} us, p99 {rows[-1]['p99_us']:.2f} us "
                  f"(p99 per repeat {rows[-1]['runs']}, load {rows[-1]['load']})", flush=True)
    return rows


# --- (b) end-to-end ingest ------------------------------------------------------------------


def committed_points(conn: psycopg.Connection, run_id: str) -> int:
    row = conn.execute("SELECT coalesce(sum(count), 0) FROM series WHERE run_id = %s", (run_id,)).fetchone()
    return int(row[0]) if row else 0


def one_ingest(stack: Stack, transport: str, steps: int, batch_size: int | None, timeout: float) -> dict[str, Any]:
    meter = CpuMeter(stack)
    cpu0 = meter.sample()
    dest = stack.api_url
    values = [{k: math.sin(i * 0.01 + j) for j, k in enumerate(KEYS)} for i in range(1024)]
    expected = steps * len(KEYS)
    with tempfile.TemporaryDirectory() as spool, psycopg.connect(stack.libpq(), autocommit=True) as conn:
        run = runcast.init(
            "bench", f"ingest-{transport}", transport=dest, token=stack.token, spool_dir=spool,
            capture_code=False, heartbeat_interval=3600, max_queue=steps + 10,
            **({"batch_size": batch_size} if batch_size else {}),
        )
        begin = time.perf_counter()
        log = run.log
        for step in range(steps):
            log(values[step & 1023], step=step)
        logged = time.perf_counter() - begin
        deadline = begin + timeout
        seen = 0
        while time.perf_counter() < deadline:
            seen = committed_points(conn, run.id)
            if seen >= expected:
                break
            time.sleep(0.01)
        elapsed = time.perf_counter() - begin
        cpu1 = meter.sample()
        run.finish(timeout=30)
        stats = run.stats
    if seen != expected:
        raise RuntimeError(f"{transport}: {seen} of {expected} points committed after {timeout:.0f} s")
    return {
        "points_per_s": expected / elapsed,
        "seconds": elapsed,
        "log_loop_s": logged,
        "cpu_us_per_point": {k: (cpu1[k] - cpu0[k]) / expected * 1e6 for k in cpu0},
        "spooled": stats.spooled,
        "dropped": stats.dropped,
    }


@contextmanager
def py_spy(stack: Stack, out_dir: Path | None, label: str) -> Iterator[None]:
    """``py-spy record`` the worker and the API while the block runs (``--py-spy DIR``)."""
    if out_dir is None:
        yield
        return
    import signal
    import subprocess

    out_dir.mkdir(parents=True, exist_ok=True)
    targets = {"worker": stack.worker.pid if stack.worker else None, "api": stack.api_pid}
    procs = []
    for name, pid in targets.items():
        if pid is None:
            continue
        procs.append(subprocess.Popen(
            [str(services.BIN / "py-spy"), "record", "--pid", str(pid), "--rate", "250", "--format", "raw",
             "--output", str(out_dir / f"{name}-{label}.txt"), "--nonblocking"],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        ))
    time.sleep(1.0)  # py-spy attaches
    try:
        yield
    finally:
        for proc in procs:
            proc.send_signal(signal.SIGINT)
        for proc in procs:
            proc.wait(timeout=60)


def _sdk_batch_size() -> int:
    import inspect

    return int(inspect.signature(runcast.init).parameters["batch_size"].default)


sdk_batch = _sdk_batch_size()


def bench_ingest(stack: Stack, steps: int, repeat: int, batch_size: int | None, transports: list[str],
                 profile_dir: Path | None = None) -> list[dict[str, Any]]:
    rows = []
    for transport in transports:
        one_ingest(stack, transport, min(steps, 2000), batch_size, 120)  # warm-up: connections, caches
        rates, loads, notes, cpus = [], [], [], []
        for i in range(repeat):
            with load_window(loads), py_spy(stack, profile_dir if i == 0 else None, transport):
                r = one_ingest(stack, transport, steps, batch_size, 600)
            rates.append(r["points_per_s"])
            cpus.append(r["cpu_us_per_point"])
            if r["spooled"] or r["dropped"]:
                notes.append(f"spooled {r['spooled']} dropped {r['dropped']}")
        rows.append(
            {
                "what": f"ingest {steps:,} steps x 8 via {transport}:// (batch {batch_size or sdk_batch}), "
                        f"{len(stack.workers)} worker(s) --pool {stack_pool}",
                "points_per_s": statistics.median(rates),
                "runs": [round(x) for x in rates],
                "load": load_str(loads),
                "notes": "; ".join(notes),
                "cpu_us_per_point": {k: statistics.median(c[k] for c in cpus) for k in cpus[0]},
            }
        )
        cpu = rows[-1]["cpu_us_per_point"]
        print("    CPU us per point (median): " + ", ".join(f"{k} {v:.2f}" for k, v in cpu.items())
              + f", total {sum(cpu.values()):.2f}", flush=True)
        print(f"  {rows[-1]['what']}: median {rows[-1]['points_per_s']:,.0f} points/s "
              f"(runs {rows[-1]['runs']}, load {rows[-1]['load']}) {rows[-1]['notes']}", flush=True)
    return rows


# --- (c) query latency ----------------------------------------------------------------------


def load_series(stack: Stack, points: int, batch_events: int) -> tuple[str, float]:
    """One run with one series of ``points`` steps of ``loss``, written by ``store_batch``.

    Reused when a run of that name already holds the series (``--pg-url`` on a kept
    database). Returns the run id and the seconds the load took (0 when reused).
    """
    from runcast.wire import events as ev
    from runcast_server.core.db import make_engine
    from runcast_server.core.models import Project
    from runcast_server.ingest.store import store_batch
    from runcast_server.record.models import Run, Series
    from sqlalchemy import select
    from sqlalchemy.orm import Session

    run_id = f"bench-query-{points}"
    engine = make_engine(stack.pg_url)
    try:
        with Session(engine) as session:
            have = session.scalar(select(Series.count).where(Series.run_id == run_id, Series.key == QUERY_KEY))
            if have == points:
                return run_id, 0.0
            if session.get(Run, run_id) is not None:
                raise RuntimeError(f"run {run_id} exists with {have} points; use a fresh database")
            project_id = session.scalar(select(Project.id).where(Project.name == "bench"))
        segment = f"seg-{points}"
        now = time.time()
        began = time.perf_counter()
        started = ev.validate_event({"v": 1, "type": "run_started", "run": run_id, "segment": segment, "seq": 0,
                                     "ts": now, "project": "bench", "name": f"query {points:,}"})
        with Session(engine) as session:
            store_batch(session, project_id, [started])
            session.commit()
        # Validated events (the form validate_event returns), built directly: validation is
        # not what this loads, and the loss curve has a few spikes and NaNs like real ones.
        for lo in range(0, points, batch_events):
            batch = []
            for step in range(lo, min(points, lo + batch_events)):
                value = 3.0 * math.exp(-step / points) + 0.05 * math.sin(step * 0.001)
                if step % 100_003 == 7:
                    value = 50.0  # a one-step spike
                elif step % 1_000_003 == 11:
                    value = math.nan
                batch.append({"v": 1, "type": "metrics", "run": run_id, "segment": segment, "seq": step + 1,
                              "ts": now, "step": step, "values": {QUERY_KEY: value}})
            with Session(engine) as session:
                store_batch(session, project_id, batch)
                session.commit()
            if points >= 1_000_000 and (lo // batch_events) % 20 == 0:
                print(f"    loaded {lo + len(batch):,}/{points:,} ({time.perf_counter() - began:.0f} s)", flush=True)
        with psycopg.connect(stack.libpq(), autocommit=True) as conn:
            conn.execute("VACUUM ANALYZE points")
            conn.execute("VACUUM ANALYZE rollups")
        return run_id, time.perf_counter() - began
    finally:
        engine.dispose()


def time_requests(client: httpx.Client, url: str, params: dict[str, Any], repeat: int) -> tuple[list[float], int, int]:
    for _ in range(3):  # warm-up
        client.get(url, params=params).raise_for_status()
    times = []
    body: dict[str, Any] = {}
    for _ in range(repeat):
        began = time.perf_counter()
        response = client.get(url, params=params)
        times.append((time.perf_counter() - began) * 1000)
        response.raise_for_status()
        body = response.json()
    buckets = sum(len(s["step"]) for s in body["series"])
    return times, buckets, body["level"]


def bench_queries(stack: Stack, sizes: list[int], requests: int, repeat: int, batch_events: int) -> list[dict[str, Any]]:
    """Load every series first, then time the views in rounds (every size once per round),
    so that a burst of load on the machine hits all sizes alike."""
    views: list[tuple[int, str, str, dict[str, Any]]] = []
    for points in sizes:
        print(f"  loading a series of {points:,} points ...", flush=True)
        run_id, seconds = load_series(stack, points, batch_events)
        if seconds:
            print(f"    loaded in {seconds:.1f} s ({points / seconds:,.0f} points/s through store_batch)", flush=True)
        mid = points // 2
        views.append((points, "full range", run_id, {}))
        # A zoom that still fills 2,000 points at every size (on 10^4 steps: 2,000 raw points).
        views.append((points, "zoom, middle 20%", run_id, {"start": mid - points // 10, "end": mid + points // 10 - 1}))
    samples: dict[tuple[int, str], dict[str, Any]] = {
        (p, v): {"p50": [], "p95": [], "loads": [], "buckets": 0, "level": 0} for p, v, _, _ in views
    }
    with httpx.Client(timeout=60) as client:
        for _ in range(repeat):
            for points, view, run_id, extra in views:
                url = f"{stack.api_url}/api/v1/runs/{run_id}/metrics"
                params = {"key": QUERY_KEY, "max_points": 2000, **extra}
                s = samples[(points, view)]
                with load_window(s["loads"]):
                    times, s["buckets"], s["level"] = time_requests(client, url, params, requests)
                s["p50"].append(statistics.median(times))
                s["p95"].append(pct(times, 0.95))
    rows = []
    for points, view, _, _ in views:
        s = samples[(points, view)]
        rows.append(
            {
                "what": f"metrics query, {points:,} points, {view}",
                "points": points,
                "view": view,
                "p50_ms": statistics.median(s["p50"]),
                "p95_ms": statistics.median(s["p95"]),
                "buckets": s["buckets"],
                "level": s["level"],
                "runs": [round(x, 1) for x in s["p50"]],
                "load": load_str(s["loads"]),
            }
        )
        r = rows[-1]
        print(f"    {points:,} points, {view}: p50 {r['p50_ms']:.1f} ms p95 {r['p95_ms']:.1f} ms ({r['buckets']} buckets, "
              f"level {r['level']}; p50 per repeat {r['runs']}, load {r['load']})", flush=True)
    return rows


# --- report ---------------------------------------------------------------------------------


def verdicts(sdk: list[dict[str, Any]], ingest: list[dict[str, Any]], queries: list[dict[str, Any]]) -> list[str]:
    out = []
    if sdk:
        worst = max(r["p99_us"] for r in sdk)
        out.append(f"log() p99 < 20 us: {'met' if worst < 20 else 'NOT met'} (worst case {worst:.2f} us)")
    if ingest:
        for r in ingest:
            ok = r["points_per_s"] >= 100_000
            out.append(f"ingest >= 100,000 points/s [{r['what']}]: {'met' if ok else 'NOT met'} "
                       f"({r['points_per_s']:,.0f})")
    if queries:
        worst = max(r["p50_ms"] for r in queries)
        out.append(f"query p50 < 50 ms: {'met' if worst < 50 else 'NOT met'} (worst {worst:.1f} ms)")
        for view in sorted({r["view"] for r in queries}):
            by = {r["points"]: r["p50_ms"] for r in queries if r["view"] == view}
            if len(by) > 1:
                lo, hi = by[min(by)], by[max(by)]
                ratio = hi / lo
                out.append(f"query p50 within 2x from {min(by):,} to {max(by):,} points ({view}): "
                           f"{'met' if ratio <= 2 else 'NOT met'} ({lo:.1f} -> {hi:.1f} ms, {ratio:.2f}x)")
    return out


def print_table(sdk: list[dict[str, Any]], ingest: list[dict[str, Any]], queries: list[dict[str, Any]]) -> None:
    header = ["measurement", "result (median of repeats)", "per repeat", "load 1m"]
    rows = []
    for r in sdk:
        rows.append([r["what"], f"mean {r['mean_us']:.2f} us, p99 {r['p99_us']:.2f} us", f"p99 {r['runs']}", r["load"]])
    for r in ingest:
        rows.append([r["what"], f"{r['points_per_s']:,.0f} points/s" + (f" ({r['notes']})" if r["notes"] else ""),
                     str(r["runs"]), r["load"]])
    for r in queries:
        rows.append([r["what"] + f" ({r['buckets']} buckets, level {r['level']})",
                     f"p50 {r['p50_ms']:.1f} ms, p95 {r['p95_ms']:.1f} ms", f"p50 {r['runs']}", r["load"]])
    try:
        from rich.console import Console
        from rich.table import Table
    except ImportError:
        widths = [max(len(str(x)) for x in col) for col in zip(header, *rows)]
        for row in [header, ["-" * w for w in widths], *rows]:
            print("  ".join(str(x).ljust(w) for x, w in zip(row, widths)))
    else:
        table = Table(*header, title="Runcast backbone")
        for row in rows:
            table.add_row(*row)
        Console(width=200).print(table)


stack_pool = "solo"


def main() -> None:
    global stack_pool
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true",
                        help="small defaults: --steps 20000 --calls 20000 --sizes 10000,100000 --repeat 3")
    parser.add_argument("--only", default="sdk,ingest,query", help="comma list of sdk, ingest, query")
    parser.add_argument("--repeat", type=int, help="repeats per measurement, the median is reported (default 5, --quick 3)")
    parser.add_argument("--calls", type=int, help="log() calls per SDK-cost repeat (default 50000)")
    parser.add_argument("--steps", type=int, help="steps (x 8 scalars) per ingest repeat (default 100000)")
    parser.add_argument("--batch-size", type=int, help="SDK batch_size for the ingest runs (default: the SDK's)")
    parser.add_argument("--transports", default="http", help="kept for old command lines: only http remains")
    parser.add_argument("--sizes", help="series lengths for the query bench (default 10000,1000000,10000000)")
    parser.add_argument("--requests", type=int, default=50, help="requests per query repeat")
    parser.add_argument("--load-batch", type=int, default=100_000, help="events per store_batch when loading series")
    parser.add_argument("--pool", default="solo", choices=["solo", "prefork"], help="each worker's pool (concurrency 1)")
    parser.add_argument("--workers", type=int, default=1, help="worker processes (each --concurrency 1)")
    parser.add_argument("--pg-url", help="use this PostgreSQL (SQLAlchemy URL) instead of a throwaway one")
    parser.add_argument("--redis-url", help="use this Redis instead of a throwaway one")
    parser.add_argument("--api-url", help="use this API instead of starting one (it must use the same database)")
    parser.add_argument("--no-worker", action="store_true", help="do not start a worker (one already consumes)")
    parser.add_argument("--pg-test-settings", action="store_true", help="throwaway PostgreSQL with fsync=off (tests' settings)")
    parser.add_argument("--pg-shared-buffers", default="512MB")
    parser.add_argument("--json", type=Path, help="also write the results here")
    parser.add_argument("--py-spy", type=Path, metavar="DIR",
                        help="py-spy record the worker and the API during the first ingest repeat (raw, for flamegraphs)")
    args = parser.parse_args()
    quick = args.quick
    args.steps = args.steps or (20_000 if quick else 100_000)
    args.calls = args.calls or (20_000 if quick else 50_000)
    args.sizes = args.sizes or ("10000,100000" if quick else "10000,1000000,10000000")
    args.repeat = args.repeat or (3 if quick else 5)
    stack_pool = args.pool
    only = set(args.only.split(","))
    sizes = [int(float(s)) for s in args.sizes.split(",") if s]

    print(f"machine: {os.cpu_count()} CPUs, {os.sysconf('SC_PAGE_SIZE') * os.sysconf('SC_PHYS_PAGES') / 2**30:.1f} GiB, "
          f"load average at start {os.getloadavg()}", flush=True)
    sdk: list[dict[str, Any]] = []
    ingest: list[dict[str, Any]] = []
    queries: list[dict[str, Any]] = []
    with ExitStack() as exits:
        stack = Stack(args, exits)
        exits.callback(shutil.rmtree, stack.tmp, True)
        print(f"services: {stack.pg_note}; redis {stack.redis_url}; api {stack.api_url}; "
              f"workers: {str(len(stack.workers)) + ' process(es), --pool ' + args.pool + ' --concurrency 1' if stack.workers else 'external'}; "
              f"logs {stack.logs}", flush=True)
        if "sdk" in only:
            print("(a) SDK cost per log()", flush=True)
            sdk = bench_log_cost(stack, args.calls, args.repeat)
        if "ingest" in only:
            print("(b) end-to-end ingest", flush=True)
            ingest = bench_ingest(stack, args.steps, args.repeat, args.batch_size, args.transports.split(","),
                                  args.py_spy)
        if "query" in only:
            print("(c) metrics query latency", flush=True)
            queries = bench_queries(stack, sizes, args.requests, args.repeat, args.load_batch)
    print()
    print_table(sdk, ingest, queries)
    for line in verdicts(sdk, ingest, queries):
        print(line)
    print(f"load average at end {os.getloadavg()}")
    if args.json:
        args.json.write_text(json.dumps({"sdk": sdk, "ingest": ingest, "queries": queries}, indent=1))


if __name__ == "__main__":
    main()
