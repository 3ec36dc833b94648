"""Latency from ``run.log()`` in the SDK to the point reaching live-stream viewers, production mode.

Starts a real stack in temp dirs -- PostgreSQL, Redis, one Celery worker (solo pool) and one
uvicorn API process (``runcast serve``) -- then for each viewer count: opens that many SSE
connections to ``/api/v1/runs/{id}/stream`` from a separate viewer process (raw asyncio
sockets, so the client costs little), logs ``--seconds`` of steps through the SDK over HTTP
with a small ``flush_interval``, and measures for every (viewer, point) the time from the
``log()`` call to the arrival of the message that carries the point. One viewer per process
parses the JSON to learn which steps each version carries; the others only read ``id:`` lines.

    .venv/bin/python bench/stream_latency.py --viewers 1,1000 --seconds 20
    .venv/bin/python bench/stream_latency.py --embedded --viewers 1 --seconds 20 --throughput 20000
    .venv/bin/python bench/stream_latency.py --api-processes 2 --viewers 10000 --seconds 20

``--api-processes N`` (production mode) starts N API processes on the same PostgreSQL and
Redis; the viewers are split evenly across them (one viewer process per API), the SDK logs
through the first, and each API process's resident memory is read before the viewers
connect and once they all are, giving the memory per viewer.

``--embedded`` runs one ``runcast serve`` in the embedded default instead (SQLite, eager
ingest, in-process hub). ``--flush-interval`` is left at the SDK's default unless given.
``--throughput N`` also logs N steps of 8 keys in a tight loop and reports how fast the
server took them (events acknowledged per second, and the HTTP requests it took).

``--ingest-cost`` instead times ``store_batch`` on PostgreSQL with and without the
run_versions log row (and with an index on points.version instead), the write cost of replay.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import json
import multiprocessing as mp
import os
import platform
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))

import services

# --- viewers (in their own process) -------------------------------------------------------------


class _Viewer(asyncio.Protocol):
    """One SSE viewer as an asyncio protocol: the loop hands it what arrives (``data_received``),
    with no task of its own to wake, so that 5,000 viewers in one process cost the CPUs this
    machine shares with the servers as little as possible (browsers run elsewhere). ``opened``
    resolves at the stream's first ``reset`` event (an error if the connection ends before)."""

    def __init__(self, request: bytes, parse: bool, out: dict[int, float], steps: dict[int, list[int]]) -> None:
        self.request, self.parse, self.out, self.steps = request, parse, out, steps
        self.opened: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self.transport: asyncio.Transport | None = None
        self.stopping = False
        self.raw = b""  # bytes as they came: the response head, then chunks when chunked
        self.head: bytes | None = None
        self.buf = b""  # the body (de-chunked) not yet split into messages

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)
        self.transport = transport
        transport.write(self.request)

    def _body(self, data: bytes) -> bytes:
        """The body bytes in ``data`` (the response head skipped; chunked encoding undone: through
        nginx a chunk may end anywhere in a message, so its size lines must not reach the parser)."""
        self.raw += data
        if self.head is None:
            end = self.raw.find(b"\r\n\r\n")
            if end < 0:
                return b""
            self.head, self.raw = self.raw[:end].lower(), self.raw[end + 4:]
        if b"transfer-encoding: chunked" not in self.head:
            body, self.raw = self.raw, b""
            return body
        parts = []
        while True:
            line_end = self.raw.find(b"\r\n")
            if line_end < 0:
                break
            size = int(self.raw[:line_end].split(b";")[0], 16)
            if len(self.raw) < line_end + 2 + size + 2:
                break
            parts.append(self.raw[line_end + 2:line_end + 2 + size])
            self.raw = self.raw[line_end + 2 + size + 2:]
        return b"".join(parts)

    def data_received(self, data: bytes) -> None:
        now = time.time()
        *messages, self.buf = (self.buf + self._body(data)).split(b"\n\n")
        for message in messages:
            if not self.opened.done():
                if b"event: reset" in message:
                    self.opened.set_result(None)
                continue
            at = message.find(b"id: ")
            if at < 0 or b"\nevent: batch\n" not in message:
                continue  # keep-alive, reset
            head, _, data_line = message[at:].partition(b"\ndata: ")
            version = int(head[4:head.index(b"\n")])
            self.out[version] = now
            if self.parse:
                msg = json.loads(data_line)
                self.steps[version] = sorted({s for p in msg["points"] for s in p["step"]})

    def connection_lost(self, exc: Exception | None) -> None:
        if not self.opened.done():
            self.opened.set_exception(ConnectionResetError("closed before the first event"))
        elif not self.stopping:
            self.out[-1] = 1.0  # the server closed the stream (dropped)

    def stop(self) -> None:
        self.stopping = True
        if self.transport is not None:
            self.transport.close()


async def _open(host: str, port: int, viewer: Any, opening: asyncio.Semaphore, retries: list[int]) -> Any:
    """Open one stream up to its first ``reset`` event, as EventSource does: a connection the server
    could not take (its accept queue full: refused or reset) is tried again after a short wait.
    At most ``opening``'s value of handshakes are in flight at once, so the viewers connect as fast
    as the server accepts them rather than overflowing its listen backlog. ``viewer()`` makes a
    fresh protocol for each try."""
    loop = asyncio.get_running_loop()
    while True:
        async with opening:
            proto = viewer()
            try:
                await loop.create_connection(lambda proto=proto: proto, host, port)
                await proto.opened
                return proto
            except OSError:
                retries[0] += 1
        await asyncio.sleep(0.5)


def viewer_process(url: str, run: str, n: int, seconds: float, conn: Any) -> None:
    """Open ``n`` streams, report ready (with the seconds it took and the retried connections),
    collect arrival times until told to stop; send them back."""
    host, port = url.removeprefix("http://").split(":")

    async def main() -> None:
        opening = asyncio.Semaphore(64)
        retries = [0]
        outs: list[dict[int, float]] = [{} for _ in range(n)]
        steps: dict[int, list[int]] = {}
        request = f"GET /api/v1/runs/{run}/stream HTTP/1.1\r\nHost: {host}\r\nAccept: text/event-stream\r\n\r\n".encode()
        began = time.monotonic()
        viewers = await asyncio.gather(*(
            _open(host, int(port), lambda i=i: _Viewer(request, i == 0, outs[i], steps), opening, retries)
            for i in range(n)
        ))  # fmt: skip
        gc.freeze()  # the viewers' connections live to the end: keep them out of the collector's passes
        conn.send(("ready", time.monotonic() - began, retries[0]))
        await asyncio.to_thread(conn.recv)  # "stop"
        await asyncio.sleep(2.0)  # the last messages in flight
        for viewer in viewers:
            viewer.stop()
        conn.send((outs, steps))

    asyncio.run(main())


# --- one measurement ----------------------------------------------------------------------------


def _timing(flush: float | None) -> dict[str, Any]:
    return {} if flush is None else {"flush_interval": flush}


def _timed_transport(url: str, token: str) -> Any:
    """The SDK's HTTP transport, keeping the duration of every request it makes (``durations``, s)."""
    from runcast.sender.transport import HttpTransport

    class Timed(HttpTransport):
        def __init__(self) -> None:
            super().__init__(url, token)
            self.durations: list[float] = []

        def send(self, body: bytes, events: list[dict[str, Any]], timeout: float) -> None:
            began = time.perf_counter()
            super().send(body, events, timeout)
            self.durations.append(time.perf_counter() - began)

    return Timed()


def _ms(values: list[float], p: float) -> float:
    values = sorted(values)
    return values[min(len(values) - 1, int(p * len(values)))] * 1000 if values else float("nan")


def _rss_mib(pid: int) -> float:
    """Resident memory of a process and its children (uvicorn runs the app in the process itself)."""
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return float("nan")


def _cpu_s(pid: int) -> float:
    """User + system CPU seconds a process has used."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def measure(urls: list[str], pids: list[int], token: str, viewers: int, seconds: float, rate: float,
            flush: float | None) -> dict[str, Any]:  # fmt: skip
    import runcast

    transport = _timed_transport(urls[0], token)
    run = runcast.init(project="bench", name=f"latency-{viewers}", transport=transport, token=token,
                       heartbeat_interval=60, **_timing(flush))  # fmt: skip
    run.log({"loss": 1.0}, step=0)
    time.sleep(1.5)  # run registered and stored before the viewers connect
    rss_before = [_rss_mib(pid) for pid in pids]
    shares = [viewers // len(urls) + (1 if i < viewers % len(urls) else 0) for i in range(len(urls))]
    pipes, procs = [], []
    for url, n in zip(urls, shares):
        if n == 0:
            continue
        parent, child = mp.Pipe()
        proc = mp.get_context("spawn").Process(target=viewer_process, args=(url, run.id, n, seconds, child))
        proc.start()
        pipes.append(parent)
        procs.append(proc)
    connect_s, retried = 0.0, 0
    for parent in pipes:
        assert parent.poll(660), "viewers did not connect"
        said, took, tries = parent.recv()
        assert said == "ready"
        connect_s, retried = max(connect_s, took), retried + tries
    rss_after = [_rss_mib(pid) for pid in pids]
    cpu_before = sum(_cpu_s(pid) for pid in pids)
    logged: dict[int, float] = {}
    step, interval = 1, 1.0 / rate
    began = time.time()
    next_at = began
    while time.time() - began < seconds:
        logged[step] = time.time()
        run.log({"loss": 1.0 / (step + 1), "lr": 3e-4}, step=step)
        step += 1
        next_at += interval
        time.sleep(max(0.0, next_at - time.time()))
    run.finish()
    for parent in pipes:
        parent.send("stop")
    outs: list[dict[int, float]] = []
    steps: dict[int, list[int]] = {}
    time.sleep(2.5)  # the viewers' last messages (they read for 2 s after "stop")
    api_cpu = sum(_cpu_s(pid) for pid in pids) - cpu_before
    for parent in pipes:
        more_outs, more_steps = parent.recv()
        outs.extend(more_outs)
        steps.update(more_steps)
    for proc in procs:
        proc.join(30)
    version_of = {s: v for v, ss in steps.items() for s in ss}
    latencies, missing, dropped = [], 0, 0
    for out in outs:
        if out.pop(-1, None):
            dropped += 1
        for s, t_log in logged.items():
            v = version_of.get(s)
            if v is None or v not in out:
                missing += 1
                continue
            latencies.append(out[v] - t_log)
    return {
        "viewers": viewers, "points": len(logged), "versions": len(steps), "deliveries": len(latencies),
        "missing": missing, "dropped": dropped, "p50": _ms(latencies, 0.50), "p95": _ms(latencies, 0.95),
        "p99": _ms(latencies, 0.99), "max": _ms(latencies, 1.0), "requests": len(transport.durations),
        "request_p50": _ms(transport.durations, 0.5), "request_p95": _ms(transport.durations, 0.95),
        "rss_before": rss_before, "rss_after": rss_after,
        "kib_per_viewer": 1024 * (sum(rss_after) - sum(rss_before)) / max(1, viewers),
        "connect_s": connect_s, "retried": retried,
        "api_us_per_message": 1e6 * api_cpu / max(1, sum(len(out) for out in outs)),
    }  # fmt: skip


def throughput(url: str, token: str, steps: int, flush: float | None) -> dict[str, Any]:
    """Log ``steps`` steps of 8 keys as fast as possible; time until the server acknowledged all of them."""
    import runcast

    transport = _timed_transport(url, token)
    run = runcast.init(project="bench", name="throughput", transport=transport, token=token,
                       heartbeat_interval=3600, capture_code=False, **_timing(flush))  # fmt: skip
    run.flush(60)
    before = run.stats.sent
    transport.durations.clear()
    keys = [f"train/m{k}" for k in range(8)]
    began = time.perf_counter()
    for step in range(steps):
        run.log({key: step * 0.001 + k for k, key in enumerate(keys)}, step=step)
    logged = time.perf_counter() - began
    run.flush(600)
    took = time.perf_counter() - began
    sent = run.stats.sent - before
    run.finish()
    return {"steps": steps, "sent": sent, "requests": len(transport.durations), "log_s": logged, "seconds": took,
            "events_per_s": sent / took, "spilled": run.stats.spilled, "dropped": run.stats.dropped}  # fmt: skip


def embedded_stack(tmp: Path, apis: int = 1) -> tuple[list[str], list[int], str, list[Any]]:
    env = {"RUNCAST_DATA_DIR": str(tmp)}
    api, url = services.start_api(env, tmp / "api.log")
    from runcast_server.core.auth import create_token
    from runcast_server.core.db import make_engine
    from sqlalchemy.orm import Session

    engine = make_engine(f"sqlite:///{tmp / 'runcast.db'}")
    with Session(engine) as s:
        token = create_token(s, "bench", label="bench")
        s.commit()
    engine.dispose()
    return [url], [api.pid], token, [api]


def stack(tmp: Path, apis: int = 1) -> tuple[list[str], list[int], str, list[Any]]:
    pg, redis = services.PostgresServer(), services.RedisServer()
    pg.start()
    redis.start()
    db = pg.create_database("bench")
    from runcast_server.core import migrate

    migrate.upgrade(pg.url(db))
    env = {"RUNCAST_DATABASE_URL": pg.url(db), "RUNCAST_REDIS_URL": redis.url(0), "RUNCAST_DATA_DIR": str(tmp)}
    worker = services.start_worker(env, tmp / "worker.log")
    started = [services.start_api(env, tmp / f"api{i}.log", name=f"api{i}") for i in range(apis)]
    from runcast_server.core.auth import create_token
    from runcast_server.core.db import make_engine
    from sqlalchemy.orm import Session

    engine = make_engine(pg.url(db))
    with Session(engine) as s:
        token = create_token(s, "bench", label="bench")
        s.commit()
    engine.dispose()
    return [url for _, url in started], [api.pid for api, _ in started], token, [*(a for a, _ in started), worker, redis, pg]


def run_latency(args: argparse.Namespace) -> None:
    if args.embedded and args.api_processes != 1:
        raise SystemExit("--api-processes: the embedded mode runs one API process (its hub is in-process)")
    with tempfile.TemporaryDirectory(prefix="runcast-bench-") as tmp:
        urls, pids, token, owned = (embedded_stack if args.embedded else stack)(Path(tmp), args.api_processes)
        try:
            rows = [measure(urls, pids, token, n, args.seconds, args.rate, args.flush_interval) for n in args.viewers]
            rate = throughput(urls[0], token, args.throughput, args.flush_interval) if args.throughput else None
        finally:
            for thing in owned:
                thing.stop()
    mode = "embedded mode (SQLite, eager ingest)" if args.embedded else "production mode"
    flush = "the SDK's default timing" if args.flush_interval is None else f"flush_interval {args.flush_interval:g} s"
    print(f"\nLive stream latency, log() -> viewer ({args.seconds:.0f} s at {args.rate:g} steps/s, 2 keys, "
          f"{flush}; {mode}, {args.api_processes} API process(es))")  # fmt: skip
    print(f"machine: {platform.machine()}, {os.cpu_count()} CPUs, load avg {' '.join(f'{x:.2f}' for x in os.getloadavg())}, Python {platform.python_version()}")
    print("| viewers | points | versions | deliveries | missing | dropped | p50 ms | p95 ms | p99 ms | max ms "
          "| requests | request p50 ms | request p95 ms | API RSS MiB before → with viewers | KiB / viewer "
          "| all connected after s | connects retried | API CPU µs / message sent |")  # fmt: skip
    print("|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--|--:|--:|--:|--:|")
    for r in rows:
        print(f"| {r['viewers']} | {r['points']} | {r['versions']} | {r['deliveries']} | {r['missing']} | {r['dropped']} "
              f"| {r['p50']:.0f} | {r['p95']:.0f} | {r['p99']:.0f} | {r['max']:.0f} | {r['requests']} "
              f"| {r['request_p50']:.0f} | {r['request_p95']:.0f} "
              f"| {' + '.join(f'{b:.0f}' for b in r['rss_before'])} → {' + '.join(f'{a:.0f}' for a in r['rss_after'])} "
              f"| {r['kib_per_viewer']:.1f} | {r['connect_s']:.1f} | {r['retried']} "
              f"| {r['api_us_per_message']:.1f} |")  # fmt: skip
    if rate is not None:
        print(f"\nIngest throughput: {rate['steps']} steps x 8 keys logged in a tight loop ({rate['log_s']:.2f} s), "
              f"all acknowledged after {rate['seconds']:.2f} s")  # fmt: skip
        print("| events sent | HTTP requests | events / request | events / s | spilled | dropped |")
        print("|--:|--:|--:|--:|--:|--:|")
        print(f"| {rate['sent']} | {rate['requests']} | {rate['sent'] / max(1, rate['requests']):.0f} "
              f"| {rate['events_per_s']:.0f} | {rate['spilled']} | {rate['dropped']} |")  # fmt: skip


# --- write cost of the replay log ---------------------------------------------------------------


def run_ingest_cost(args: argparse.Namespace) -> None:
    from runcast.wire import events as ev
    from runcast_server.core import migrate
    from runcast_server.core.auth import get_or_create_project
    from runcast_server.core.db import make_engine
    from runcast_server.ingest import store as ingest
    from sqlalchemy import text
    from sqlalchemy.orm import Session

    pg = services.PostgresServer()
    pg.start()
    try:
        results = {}
        for variant in ("log row (shipped)", "no log row", "no log row + index on points(series_id, version)"):
            db = pg.create_database()
            migrate.upgrade(pg.url(db))
            engine = make_engine(pg.url(db))
            if "index" in variant:
                with engine.begin() as c:
                    c.execute(text("CREATE INDEX ix_points_series_version ON points (series_id, version)"))
            original = ingest.write_version_log
            if "no log row" in variant:
                ingest.write_version_log = lambda *a, **k: None  # type: ignore[assignment]
            try:
                with Session(engine) as s:
                    pid = get_or_create_project(s, "bench").id
                    s.commit()
                seq = 0

                def event(kind: str, **f: Any) -> dict[str, Any]:
                    nonlocal seq
                    seq += 1
                    return ev.validate_event({"v": 1, "type": kind, "run": "bench-run-01", "segment": "bench-seg-01",
                                              "seq": seq, "ts": time.time(), **f})  # fmt: skip

                with Session(engine) as s:
                    ingest.store_batch(s, pid, [event("run_started", project="bench", name="b")])
                    s.commit()
                times, step = [], 0
                for _ in range(args.batches):
                    batch = []
                    for _ in range(args.batch_steps):
                        batch.append(event("metrics", step=step, values={f"k{i}": step * 0.1 + i for i in range(4)}))
                        step += 1
                    t = time.perf_counter()
                    with Session(engine) as s:
                        ingest.store_batch(s, pid, batch)
                        s.commit()
                    times.append(time.perf_counter() - t)
                results[variant] = statistics.median(times) * 1000
            finally:
                ingest.write_version_log = original  # type: ignore[assignment]
                engine.dispose()
        print(f"\nstore_batch on PostgreSQL, {args.batches} batches of {args.batch_steps} steps x 4 keys (median ms per batch)")
        print("| variant | ms / batch | vs no log row |")
        print("|---|--:|--:|")
        base = results["no log row"]
        for k, v in results.items():
            print(f"| {k} | {v:.1f} | {100 * (v / base - 1):+.1f}% |")
    finally:
        pg.stop()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--viewers", type=lambda s: [int(x) for x in s.split(",")], default=[1, 1000])
    ap.add_argument("--seconds", type=float, default=20.0, help="How long to log for, per viewer count.")
    ap.add_argument("--rate", type=float, default=20.0, help="Steps logged per second.")
    ap.add_argument("--flush-interval", type=float, default=None, help="The SDK's flush_interval (s); default: the SDK's.")
    ap.add_argument("--embedded", action="store_true", help="One `runcast serve` in the embedded default.")
    ap.add_argument("--api-processes", type=int, default=1, help="API processes (production mode); viewers split across them.")
    ap.add_argument("--throughput", type=int, default=0, help="Also log this many steps as fast as possible.")
    ap.add_argument("--ingest-cost", action="store_true", help="Measure the write cost of the replay log instead.")
    ap.add_argument("--batches", type=int, default=200)
    ap.add_argument("--batch-steps", type=int, default=250)
    args = ap.parse_args()
    if args.ingest_cost:
        run_ingest_cost(args)
    else:
        run_latency(args)


if __name__ == "__main__":
    main()
