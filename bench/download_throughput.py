"""Checkpoint download throughput over loopback, and the cost of a resumed download.

    .venv/bin/python bench/download_throughput.py [--size-gb 2] [--repeat 3] [--keep] [--via-nginx]

Writes a real (not sparse) file of ``--size-gb`` GiB under a temporary storage root,
records it as a checkpoint of a run in a fresh embedded database, starts
``runcast serve`` (uvicorn, the real app) on a free port, and measures:

* ``GET .../download`` streamed by httpx into /dev/null, and by curl into /dev/null
  (the server's ceiling, with a client that is not the bottleneck);
* ``runcast download`` (the CLI's code: writes the file and hashes it as it goes);
* a resumed download: a proxy cuts the first transfer halfway, the client resumes
  with Range + If-Range; the table reports the body bytes that crossed the wire in
  total and how many of them were sent twice (the target is 0).

With ``--via-nginx`` the same requests go through nginx (deploy/nginx's site, started
as in tests/topology) and the API hands each download to it (``X-Accel-Redirect``, the
``RUNCAST_DOWNLOAD_ACCEL_PREFIX`` setting): nginx sends the file with sendfile.

Prints one table (markdown). The first pass also warms the page cache, so the
numbers are for a checkpoint that the server has in memory: the common case right
after a trainer wrote it.
"""

from __future__ import annotations

import argparse
import hashlib
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import httpx

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))  # the cutting proxy lives with the tests

GIB = 1024**3


def write_checkpoint(path: Path, size: int) -> str:
    """``size`` bytes of incompressible data (a 64 MiB random block, repeated); returns the sha256."""
    block = os.urandom(64 * 1024 * 1024)
    digest = hashlib.sha256()
    with open(path, "wb") as f:
        left = size
        while left:
            piece = block[: min(left, len(block))]
            f.write(piece)
            digest.update(piece)
            left -= len(piece)
    return digest.hexdigest()


def seed_run(data_dir: Path, storage: Path, size: int, sha: str) -> str:
    os.environ["RUNCAST_DATA_DIR"] = str(data_dir)
    os.environ["RUNCAST_STORAGE_ROOT"] = str(storage)
    from runcast.wire import events as ev
    from runcast_server.core import migrate
    from runcast_server.core.auth import get_or_create_project
    from runcast_server.core.db import Database
    from runcast_server.ingest.store import store_batch
    from runcast_server.core.settings import Settings

    url = Settings().sqlalchemy_url
    migrate.upgrade(url)
    run, segment = ev.new_id(), ev.new_id()
    now = time.time()
    raw = [
        {"type": "run_started", "project": "bench", "name": "download-bench", "seq": 0},
        {"type": "checkpoint", "step": 1000, "path": "bench/ckpt/model.bin", "size": size, "sha256": sha, "seq": 1},
    ]
    events = [ev.validate_event({"v": 1, "run": run, "segment": segment, "ts": now, **e}) for e in raw]
    db = Database.open(url)
    try:
        with db.scope() as session:
            project = get_or_create_project(session, "bench")
            store_batch(session, project.id, events)
    finally:
        db.engine.dispose()
    return run


def start_server(data_dir: Path, storage: Path, port: int, log: Path, accel: bool) -> subprocess.Popen[bytes]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("RUNCAST_")}
    env.update({"RUNCAST_DATA_DIR": str(data_dir), "RUNCAST_STORAGE_ROOT": str(storage)})
    if accel:
        env["RUNCAST_DOWNLOAD_ACCEL_PREFIX"] = "/_runcast_files/"
    proc = subprocess.Popen(
        [str(Path(sys.executable).parent / "runcast"), "serve", "--port", str(port)],
        env=env,
        stdout=open(log, "wb"),  # noqa: SIM115 - lives as long as the server
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        try:
            if httpx.get(f"http://127.0.0.1:{port}/healthz", timeout=1).status_code == 200:
                return proc
        except httpx.HTTPError:
            time.sleep(0.1)
    proc.kill()
    raise SystemExit(f"the server did not start; log: {log.read_text()[-2000:]}")


def to_devnull(url: str) -> tuple[float, int]:
    received = 0
    started = time.perf_counter()
    with httpx.Client(timeout=120) as client, client.stream("GET", url) as response:
        response.raise_for_status()
        for chunk in response.iter_raw():
            received += len(chunk)
    return time.perf_counter() - started, received


def group_cpu_seconds(pgid: int) -> float:
    """CPU seconds (user + system) used so far by the live processes of process group ``pgid``."""
    total = 0
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[2]) == pgid:  # fields after the name: state ppid pgrp ... utime(11) stime(12)
            total += int(fields[11]) + int(fields[12])
    return total / os.sysconf("SC_CLK_TCK")


def curl_to_devnull(url: str) -> tuple[float, int] | None:
    """curl's own timing of a download into /dev/null; None without curl."""
    if shutil.which("curl") is None:
        return None
    out = subprocess.run(["curl", "-sS", "-o", "/dev/null", "-w", "%{time_total} %{size_download}", url],
                         capture_output=True, text=True, check=True, timeout=600).stdout.split()
    return float(out[0]), int(out[1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--size-gb", type=float, default=2.0, help="checkpoint size in GiB (default 2)")
    parser.add_argument("--repeat", type=int, default=3, help="timed passes per measurement (default 3)")
    parser.add_argument("--keep", action="store_true", help="keep the temporary directory")
    parser.add_argument("--via-nginx", action="store_true",
                        help="through nginx, the API handing the file to it with X-Accel-Redirect")
    args = parser.parse_args()

    from artifacts.live import CuttingProxy
    from runcast.cli.download import download
    from services import free_port

    tmp = Path(tempfile.mkdtemp(prefix="runcast-dl-bench-"))
    proc = proxy_server = None
    try:
        data_dir, storage = tmp / "data", tmp / "storage"
        (storage / "bench" / "ckpt").mkdir(parents=True)
        for d in (tmp, storage, storage / "bench", storage / "bench" / "ckpt"):
            d.chmod(0o755)  # nginx runs as nobody when this runs as root
        size = int(args.size_gb * GIB)
        t0 = time.perf_counter()
        sha = write_checkpoint(storage / "bench" / "ckpt" / "model.bin", size)
        write_s = time.perf_counter() - t0
        run = seed_run(data_dir, storage, size, sha)
        port = free_port()
        proc = start_server(data_dir, storage, port, tmp / "server.log", accel=args.via_nginx)
        base = f"http://127.0.0.1:{port}"
        if args.via_nginx:
            from topology.nginx import Nginx

            proxy_server = Nginx([base], storage, tmp / "logs").start()
            base = proxy_server.url
        (ck,) = httpx.get(f"{base}/api/v1/runs/{run}/checkpoints").json()["checkpoints"]
        url = base + ck["download_url"]

        to_devnull(url)  # warm-up pass (page cache, imports)
        devnull = []
        for _ in range(args.repeat):
            seconds, received = to_devnull(url)
            assert received == size, (received, size)
            devnull.append(seconds)

        # The server's CPU per GiB sent (its process group: uvicorn, or nginx's master and
        # workers; for nginx the API's X-Accel answer is in the API's group, counted too):
        # what a transfer costs, whatever the machine's load.
        groups = [proc.pid] + ([proxy_server.proc.pid] if proxy_server is not None and proxy_server.proc else [])
        cpu_before = sum(group_cpu_seconds(g) for g in groups)
        curl = [r for r in (curl_to_devnull(url) for _ in range(args.repeat)) if r is not None]
        cpu_per_gib = (sum(group_cpu_seconds(g) for g in groups) - cpu_before) / (len(curl) * size / GIB) if curl else None
        assert all(received == size for _, received in curl), curl

        cli = []
        for i in range(args.repeat):
            out = tmp / f"out{i}"
            t = time.perf_counter()
            result = download(base, run, str(ck["id"]), out)
            cli.append(time.perf_counter() - t)
            assert result.verified and result.sha256 == sha
            shutil.rmtree(out)

        proxy = CuttingProxy(int(base.rsplit(":", 1)[1]), cut_after=size // 2, cuts=2)  # 1: the list; 2: cut
        try:
            with httpx.Client(limits=httpx.Limits(max_keepalive_connections=0), timeout=120) as http:
                t = time.perf_counter()
                result = download(proxy.url, run, str(ck["id"]), tmp / "resumed", client=http)
                resume_s = time.perf_counter() - t
        finally:
            proxy.close()
        transfers = [c for c in proxy.connections if c.request_header("Range") is not None or c.body > 1_000_000]
        body_total = sum(c.body for c in transfers)
        resent = body_total - size
        assert result.verified

        def rate(seconds: list[float]) -> str:
            best, median = min(seconds), statistics.median(seconds)
            return f"{size / best / 1e9:.2f} GB/s best, {size / median / 1e9:.2f} GB/s median ({median:.2f} s)"

        with open("/proc/loadavg") as f:
            load = " ".join(f.read().split()[:3])
        served = "nginx (X-Accel-Redirect, sendfile) in front of runcast serve" if args.via_nginx else "runcast serve (uvicorn)"
        print(f"machine: {platform.node()} {platform.machine()} {os.cpu_count()} cores, Python {platform.python_version()}, "
              f"load average {load}")
        print(f"served by: {served}")
        print(f"file: {size:,} bytes ({args.size_gb:g} GiB), written in {write_s:.1f} s; repeat {args.repeat}\n")
        print("| measurement | result |")
        print("|---|---|")
        print(f"| httpx stream -> /dev/null | {rate(devnull)} |")
        if curl:
            print(f"| curl -> /dev/null (server ceiling) | {rate([seconds for seconds, _ in curl])} |")
            print(f"| server CPU per GiB sent (during the curl passes) | {cpu_per_gib:.2f} s "
                  f"(= {1 / cpu_per_gib:.1f} GiB/s per core the server gets) |")
        print(f"| runcast download -> file, sha256 verified | {rate(cli)} |")
        print(
            f"| resumed download (cut at {transfers[0].body:,} bytes) | {len(transfers)} transfers, "
            f"{body_total:,} body bytes for a {size:,}-byte file: {resent} bytes re-sent; {resume_s:.1f} s through a Python proxy |"
        )
        print(f"| second request | `Range: {transfers[-1].request_header('Range')}`, `If-Range: {transfers[-1].request_header('If-Range')[:14]}...\"` |")
    finally:
        if proxy_server is not None:
            proxy_server.stop()
        if proc is not None:
            os.killpg(proc.pid, 15)
            proc.wait(timeout=30)
        if args.keep:
            print(f"kept {tmp}")
        else:
            shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
