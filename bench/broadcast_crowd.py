"""A crowd watching one live public run through the shipped nginx site and its cache (issue 28).

Starts an embedded ``runcast serve`` (SQLite, eager ingest) in a temp dir, the shipped nginx site
in front of it (``deploy/nginx/runcast.conf.template`` rendered as tests/topology/nginx.py does,
with room for 20,000 connections and no access log), and a trainer that logs ``--rate`` steps a
second of 4 keys through the SDK and nginx, for the whole sitting. Then, for each viewer count:

* cache: ``--procs`` processes of simulated viewers (bench/crowd_viewers.py) each poll the edge
  about once a second through nginx (``If-None-Match``), fetch the pieces they lack and apply the
  messages by version;
* stream (``--sse``): the same counts of SSE viewers (bench/stream_latency.py's raw-socket
  viewers) on ``/api/v1/runs/{id}/stream`` through nginx, no cache.

Over a ``--seconds`` window it reports the origin's requests/s (the API's own Prometheus
``runcast_http_request_duration_seconds_count``, by route), the CPU seconds per wall second of
the API, nginx and the viewer processes (from /proc, by process group), requests the generator
made, how late its polls started, and staleness: for every (viewer, version stored in the
window), the time from the version's ``run_versions.committed_at`` to its arrival at the viewer.

    .venv/bin/python bench/broadcast_crowd.py --viewers 1000,10000 --sse 1000,10000 --seconds 20
"""

from __future__ import annotations

import argparse
import bisect
import multiprocessing as mp
import os
import platform
import sqlite3
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

import httpx
from prometheus_client.parser import text_string_to_metric_families

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))
sys.path.insert(0, str(ROOT / "bench"))

import crowd_viewers  # noqa: E402
import stream_latency  # noqa: E402
from topology import nginx as nginx_site  # noqa: E402

KEYS = ("train/loss", "train/lr", "train/grad_norm", "train/tokens_per_s")
ROUTES = {"edge": "/api/v1/runs/{run_id}/broadcast/edge", "pieces": "/api/v1/runs/{run_id}/broadcast/pieces/{piece}",
          "stream": "/api/v1/runs/{run_id}/stream", "ingest": "/api/v1/ingest"}  # fmt: skip


def _group_cpu_s(pgid: int) -> float:
    """User + system CPU seconds of every live process in a process group."""
    total = 0.0
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[2]) == pgid:
            total += (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    return total


def _origin(api: str) -> dict[str, float]:
    """Requests the API process answered so far, by route (its own /metrics)."""
    counts = dict.fromkeys(ROUTES, 0.0)
    try:
        body = httpx.get(f"{api}/metrics", timeout=20).text
    except httpx.TimeoutException:  # the API is swamped: the row says so (nginx's log still counts)
        return dict.fromkeys(ROUTES, float("nan"))
    names = {route: name for name, route in ROUTES.items()}
    for family in text_string_to_metric_families(body):
        for sample in family.samples:
            if sample.name == "runcast_http_request_duration_seconds_count" and sample.labels["route"] in names:
                counts[names[sample.labels["route"]]] += sample.value
    return counts


class Trainer(threading.Thread):
    """The SDK logging ``rate`` steps a second of four keys, through nginx, until stopped."""

    def __init__(self, url: str, token: str, rate: float) -> None:
        super().__init__(daemon=True)
        import runcast
        from runcast.sender.transport import HttpTransport

        self.rate, self.halt = rate, threading.Event()
        self.handle = runcast.init(project="bench", name="crowd", transport=HttpTransport(url, token), token=token,
                                heartbeat_interval=60, capture_code=False)  # fmt: skip
        self.steps = 0

    def run(self) -> None:
        began = time.time()
        while not self.halt.is_set():
            s = self.steps
            self.handle.log({k: 1.0 / (s + 1) + i for i, k in enumerate(KEYS)}, step=s)
            self.steps += 1
            time.sleep(max(0.0, began + self.steps / self.rate - time.time()))
        self.handle.finish()


def committed(db: Path, run: str) -> dict[int, float]:
    """committed_at of the run's versions that stored points."""
    with sqlite3.connect(db) as c:
        rows = c.execute("SELECT version, committed_at FROM run_versions WHERE run_id = ? AND points > 0", (run,))
        return dict(rows.fetchall())


def nginx_counts(log: Path, t0: float, t1: float) -> dict[str, float]:
    """Per second over [t0, t1], from nginx's access log: broadcast requests by cache status, and
    those it passed to the origin (an upstream address logged: MISS, EXPIRED, BYPASS, a refresh)."""
    counts: dict[str, float] = {}
    with open(log) as f:
        for line in f:
            at, status, upstream, uri = line.split(" ", 3)
            if not t0 <= float(at) <= t1 or "/broadcast/" not in uri:
                continue
            counts[status] = counts.get(status, 0) + 1
            if upstream != "-":
                counts["to origin"] = counts.get("to origin", 0) + 1
    return {k: v / (t1 - t0) for k, v in counts.items()}


def _pct(values: list[float], p: float) -> float:
    values = sorted(values)
    return values[min(len(values) - 1, int(p * len(values)))] if values else float("nan")


class Window:
    """Origin requests, CPU and wall time over one measured window."""

    def __init__(self, api: str, groups: dict[str, int], viewers: list[int]) -> None:
        self.api, self.groups, self.viewers = api, groups, viewers
        self.t0, self.o0 = time.time(), _origin(api)
        self.c0 = self.cpu()

    def cpu(self) -> dict[str, float]:
        """CPU seconds so far: each process group (the API, nginx), and the viewer processes."""
        return {**{k: _group_cpu_s(g) for k, g in self.groups.items()},
                "viewers": sum(stream_latency._cpu_s(pid) for pid in self.viewers)}

    def close(self) -> dict[str, Any]:
        t1, o1 = time.time(), _origin(self.api)
        wall = t1 - self.t0
        cpu = {k: (v - self.c0[k]) / wall for k, v in self.cpu().items()}
        self.t1 = t1
        return {"wall": wall, **{f"{k}/s": (o1[k] - self.o0[k]) / wall for k in ROUTES}, **{f"cpu {k}": v for k, v in cpu.items()}}


def _spawn(target: Any, args_for: list[tuple[Any, ...]]) -> tuple[list[Any], list[Any]]:
    pipes, procs = [], []
    for args in args_for:
        parent, child = mp.Pipe()
        proc = mp.get_context("spawn").Process(target=target, args=(*args, child))
        proc.start()
        pipes.append(parent)
        procs.append(proc)
    return pipes, procs


def _shares(n: int, k: int) -> list[int]:
    return [s for s in (n // k + (1 if i < n % k else 0) for i in range(k)) if s]


def cache_path(url: str, api: str, db: Path, run: str, n: int, seconds: float, procs: int,
               groups: dict[str, int], log: Path) -> dict[str, Any]:  # fmt: skip
    pipes, children = _spawn(crowd_viewers.crowd_process, [(url, run, s) for s in _shares(n, procs)])
    connect_s = 0.0
    for p in pipes:
        assert p.poll(600), "viewers did not connect"
        connect_s = max(connect_s, p.recv()[1])
    time.sleep(3.0)  # every viewer has caught up on the pieces before the window
    window = Window(api, groups, [c.pid for c in children])
    for p in pipes:
        p.send("mark")
    time.sleep(seconds)
    row = window.close()
    for p in pipes:
        p.send("end")
    time.sleep(3.0)  # the window's last versions reach every viewer
    for p in pipes:
        p.send("stop")
    tallies = [p.recv() for p in pipes]
    seen = nginx_counts(log, window.t0, window.t1)
    for c in children:
        c.join(30)
    times = committed(db, run)
    wanted = sorted(v for v, t in times.items() if window.t0 <= t <= window.t1)
    stale = [at - times[v] for t in tallies for at, lo, hi in t.arrivals
             for v in wanted[bisect.bisect_right(wanted, lo):bisect.bisect_right(wanted, hi)]]  # fmt: skip
    messages = set().union(*(t.message_versions for t in tallies))
    wrong = sum(1 for t in tallies for a, j, h in zip(t.applied, t.joined, t.held)
                if a != sum(1 for m in messages if j < m <= h))  # a message missed or applied twice
    polls = sum(len(t.lags) for t in tallies)
    lags = [x for t in tallies for x in t.lags]
    return {**row, "nginx": seen, "viewers": n, "versions": len(wanted), "deliveries": len(stale),
            "missing": n * len(wanted) - len(stale), "wrong": wrong,
            "errors": sum(t.errors for t in tallies), "requests/s": sum(t.requests for t in tallies) / row["wall"],
            "polls/s": polls / row["wall"], "lag p95": _pct(lags, 0.95),
            "on time": sum(1 for x in lags if x <= 0.25) / max(1, polls),
            "p50": _pct(stale, 0.5), "p95": _pct(stale, 0.95), "p99": _pct(stale, 0.99),
            "edge 200": sum(t.edges_200 for t in tallies), "edge 304": sum(t.edges_304 for t in tallies),
            "edge bytes": sum(t.edge_bytes for t in tallies) / max(1, sum(t.edges_200 for t in tallies)),
            "piece bytes": sum(t.piece_bytes for t in tallies) / max(1, sum(t.pieces for t in tallies)),
            "bytes in/s": sum(t.bytes_in for t in tallies) / row["wall"], "connect s": connect_s}  # fmt: skip


def stream_path(url: str, api: str, db: Path, run: str, n: int, seconds: float, procs: int,
                groups: dict[str, int]) -> dict[str, Any]:  # fmt: skip
    pipes, children = _spawn(stream_latency.viewer_process, [(url, run, s, seconds) for s in _shares(n, procs)])
    connect_s, retried = 0.0, 0
    for p in pipes:
        if not p.poll(300):
            for c in children:
                c.kill()
            return {"viewers": n, "failed": "viewers did not all connect within 300 s"}
        said, took, tries = p.recv()
        connect_s, retried = max(connect_s, took), retried + tries
    time.sleep(2.0)
    window = Window(api, groups, [c.pid for c in children])
    time.sleep(seconds)
    row = window.close()
    time.sleep(1.0)
    for p in pipes:
        p.send("stop")
    outs: list[dict[int, float]] = []
    for p in pipes:
        outs.extend(p.recv()[0])
    for c in children:
        c.join(30)
    times = committed(db, run)
    wanted = sorted(v for v, t in times.items() if window.t0 <= t <= window.t1)
    stale = [out[v] - times[v] for out in outs for v in wanted if v in out]
    return {**row, "viewers": n, "versions": len(wanted), "deliveries": len(stale),
            "missing": n * len(wanted) - len(stale), "dropped": sum(1 for out in outs if out.get(-1)),
            "p50": _pct(stale, 0.5), "p95": _pct(stale, 0.95), "p99": _pct(stale, 0.99),
            "connect s": connect_s, "retried": retried}  # fmt: skip


def _site(viewers: int) -> None:
    """The test harness's top-level nginx configuration, with room for the crowd (connections: each
    viewer's, and each SSE viewer's upstream too), and an access log of each request's time, cache
    status and upstream: what nginx sent the origin, counted even when the origin stops answering."""
    nginx_site.MAIN = (nginx_site.MAIN.replace("worker_connections 1000;", f"worker_connections {viewers + 2000};")
                       .replace("master_process on;", "master_process on;\nworker_rlimit_nofile 20000;")
                       .replace("access_log {prefix}/access.log;", "log_format crowd '$msec $upstream_cache_status "
                                "$upstream_addr $uri';\n    access_log {prefix}/access.log crowd buffer=256k flush=1s;"))  # fmt: skip


def gzip_sizes(url: str, run: str) -> tuple[int, int]:
    """The edge as nginx sends it now: plain and gzip bytes (a CDN compresses as nginx does)."""
    path = f"{url}/api/v1/runs/{run}/broadcast/edge"
    plain = httpx.get(path, headers={"Accept-Encoding": "identity"}).content
    with httpx.stream("GET", path, headers={"Accept-Encoding": "gzip"}) as r:
        packed = sum(len(c) for c in r.iter_raw())
    return len(plain), packed


def print_tables(args: argparse.Namespace, cache: list[dict[str, Any]], sse: list[dict[str, Any]], sizes: tuple[int, int],
                 load: tuple[float, ...]) -> None:  # fmt: skip
    la = " ".join(f"{x:.2f}" for x in load)
    print(f"\nOne public run at {args.rate:g} steps/s x 4 keys, embedded `runcast serve` behind the shipped nginx site; "
          f"{args.seconds:.0f} s window per row; {os.cpu_count()} CPUs; load avg before {la}, after "
          f"{' '.join(f'{x:.2f}' for x in os.getloadavg())}; Python {platform.python_version()}")  # fmt: skip
    print("\nCache path (edge every second + pieces, through nginx's cache):")
    print("| viewers | origin req/s (edge + pieces) | nginx → origin req/s | ingest req/s | API CPU | nginx CPU | viewers' CPU | requests made/s "
          "| polls/s | polls on time (≤250 ms late) | poll lag p95 s | staleness p50 / p95 / p99 s | versions | deliveries "
          "| missing | wrong | errors | edge 200 / 304 | edge B | piece B | bytes in/s |")  # fmt: skip
    print("|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--|--:|--:|--:|--:|--:|--|--:|--:|--:|")
    for r in cache:
        print(f"| {r['viewers']} | {r['edge/s'] + r['pieces/s']:.2f} ({r['edge/s']:.2f} + {r['pieces/s']:.2f}) "
              f"| {r['nginx'].get('to origin', 0):.2f} | {r['ingest/s']:.1f} | {r['cpu api']:.2f} | {r['cpu nginx']:.2f} | {r['cpu viewers']:.2f} "
              f"| {r['requests/s']:.0f} | {r['polls/s']:.0f} | {100 * r['on time']:.1f} % | {r['lag p95']:.2f} "
              f"| {r['p50']:.2f} / {r['p95']:.2f} / {r['p99']:.2f} | {r['versions']} | {r['deliveries']} | {r['missing']} "
              f"| {r['wrong']} | {r['errors']} | {r['edge 200']} / {r['edge 304']} | {r['edge bytes']:.0f} "
              f"| {r['piece bytes']:.0f} | {r['bytes in/s'] / 1e6:.1f} MB |")  # fmt: skip
    if sse:
        print("\nStream path (SSE through nginx, no cache):")
        print("| viewers | origin connections | API CPU | nginx CPU | viewers' CPU | staleness p50 / p95 / p99 s "
              "| versions | deliveries | missing | dropped | all connected after s | connects retried |")  # fmt: skip
        print("|--:|--:|--:|--:|--:|--|--:|--:|--:|--:|--:|--:|")
        for r in sse:
            if "failed" in r:
                print(f"| {r['viewers']} | {r['failed']} |||||||||||")
                continue
            print(f"| {r['viewers']} | {r['viewers']} | {r['cpu api']:.2f} | {r['cpu nginx']:.2f} | {r['cpu viewers']:.2f} "
                  f"| {r['p50']:.2f} / {r['p95']:.2f} / {r['p99']:.2f} | {r['versions']} | {r['deliveries']} "
                  f"| {r['missing']} | {r['dropped']} | {r['connect s']:.1f} | {r['retried']} |")  # fmt: skip
    for r in cache:
        print(f"nginx at {r['viewers']} viewers, broadcast requests/s by cache status: "
              + ", ".join(f"{k} {v:.1f}" for k, v in sorted(r["nginx"].items())))
    print(f"\nEdge now: {sizes[0]} B plain, {sizes[1]} B gzip")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    counts = lambda s: [int(x) for x in s.split(",") if x]  # noqa: E731
    ap.add_argument("--viewers", type=counts, default=[1000, 10000], help="Cache-path viewer counts.")
    ap.add_argument("--sse", type=counts, default=[], help="Stream-path viewer counts (none by default).")
    ap.add_argument("--seconds", type=float, default=20.0, help="Measured window per row.")
    ap.add_argument("--rate", type=float, default=10.0, help="Steps the trainer logs per second.")
    ap.add_argument("--procs", type=int, default=2, help="Viewer processes per row.")
    args = ap.parse_args()
    load = os.getloadavg()
    _site(max([*args.viewers, *args.sse]))
    with tempfile.TemporaryDirectory(prefix="runcast-crowd-") as tmp:
        urls, _pids, token, owned = stream_latency.embedded_stack(Path(tmp))
        files = Path(tmp) / "files"
        files.mkdir()
        os.chmod(tmp, 0o755)
        proxy = nginx_site.Nginx(urls, files, Path(tmp) / "logs").start()
        print(f"api {urls[0]}, nginx {proxy.url}, logs in {tmp}", flush=True)
        trainer = Trainer(proxy.url, token, args.rate)
        try:
            trainer.start()
            time.sleep(3.0)
            run = trainer.handle.id
            edge = httpx.get(f"{proxy.url}/api/v1/runs/{run}/broadcast/edge")
            assert edge.status_code == 200, f"the run is not public: {edge.status_code} {edge.text}"
            groups = {"api": owned[0].pid, "nginx": proxy.proc.pid if proxy.proc else 0}
            db = Path(tmp) / "runcast.db"
            cache = [cache_path(proxy.url, urls[0], db, run, n, args.seconds, args.procs, groups,
                             proxy.prefix / "access.log") for n in args.viewers]  # fmt: skip
            sse = [stream_path(proxy.url, urls[0], db, run, n, args.seconds, args.procs, groups) for n in args.sse]
            sizes = gzip_sizes(proxy.url, run)
        finally:
            trainer.halt.set()
            trainer.join(30)
            proxy.stop()
            for thing in owned:
                thing.stop()
    print_tables(args, cache, sse, sizes, load)


if __name__ == "__main__":
    main()
