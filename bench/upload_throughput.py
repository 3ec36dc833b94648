"""Checkpoint upload throughput over loopback: the SDK publishing a file to ``runcast serve``.

    .venv/bin/python bench/upload_throughput.py [--size-gb 2] [--repeat 2] [--chunk-mb 8] [--keep]

Writes a real (not sparse) file of ``--size-gb`` GiB in a trainer directory, starts
``runcast serve`` (uvicorn, the real app, embedded default) with its own data directory
(nothing shared but HTTP), and runs a training process (tests/artifacts/upload_driver.py:
``init``, ``run.checkpoint``, ``finish``) that publishes it. Each repeat is a new run, so
every byte crosses the wire. Reported:

* ``sha256 of the file`` in this process: the floor of the trainer's own pass over it;
* ``publish``: from ``run.checkpoint()`` to ``finish()`` returning, i.e. the SDK hashing
  the file, sending every chunk (each with its sha256, written and fsync'd by the server),
  the server reading the file back to verify it, moving it into place and recording the
  event. The rate is file size / that time.

Prints one table (markdown) with the load average before and after.
"""

from __future__ import annotations

import argparse
import hashlib
import json
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
GIB = 1024**3
DRIVER = ROOT / "tests" / "artifacts" / "upload_driver.py"
RUNCAST = Path(sys.executable).parent / "runcast"


def write_file(path: Path, size: int) -> str:
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


def free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def server_env(data_dir: Path, chunk: int) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("RUNCAST_")}
    env.update(RUNCAST_DATA_DIR=str(data_dir), RUNCAST_UPLOAD_CHUNK_BYTES=str(chunk))
    return env


def start_server(env: dict[str, str], port: int, log: Path) -> subprocess.Popen[bytes]:
    proc = subprocess.Popen([str(RUNCAST), "serve", "--host", "127.0.0.1", "--port", str(port)], env=env,
                            stdout=open(log, "wb"), stderr=subprocess.STDOUT)  # noqa: SIM115
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        try:
            if httpx.get(f"http://127.0.0.1:{port}/healthz", timeout=1).status_code == 200:
                return proc
        except httpx.TransportError:
            time.sleep(0.2)
    proc.kill()
    raise SystemExit(f"the server did not start; log: {log.read_text()[-2000:]}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size-gb", type=float, default=2.0)
    parser.add_argument("--repeat", type=int, default=2)
    parser.add_argument("--chunk-mb", type=int, default=8)
    parser.add_argument("--keep", action="store_true")
    args = parser.parse_args()
    size = int(args.size_gb * GIB)
    tmp = Path(tempfile.mkdtemp(prefix="runcast-upload-bench-"))
    load_before = Path("/proc/loadavg").read_text().split()[:3]
    proc = None
    try:
        trainer, data_dir = tmp / "trainer", tmp / "server"
        trainer.mkdir()
        data_dir.mkdir()
        ckpt = trainer / "model.pt"
        t0 = time.perf_counter()
        sha = write_file(ckpt, size)
        write_s = time.perf_counter() - t0
        t0 = time.perf_counter()
        digest = hashlib.sha256()
        with open(ckpt, "rb") as f:
            while chunk := f.read(1 << 20):
                digest.update(chunk)
        hash_s = time.perf_counter() - t0
        env = server_env(data_dir, args.chunk_mb * 1024 * 1024)
        token = [w for w in subprocess.run([str(RUNCAST), "token", "create", "--project", "demo"], env=env,
                                           capture_output=True, text=True, check=True).stdout.split()
                 if w.startswith("rc_")][-1]
        port = free_port()
        proc = start_server(env, port, tmp / "server.log")
        url = f"http://127.0.0.1:{port}"
        publish: list[float] = []
        for i in range(args.repeat):
            out = trainer / f"stats-{i}.json"
            driver_env = {k: v for k, v in os.environ.items() if not k.startswith("RUNCAST_")}
            driver_env.update(HOME=str(trainer), RUNCAST_SPOOL_DIR=str(trainer / "spool"))
            subprocess.run([sys.executable, str(DRIVER), url, token, str(ckpt), str(i), str(out)], env=driver_env,
                           cwd=trainer, check=True, capture_output=True, timeout=3600)
            stats = json.loads(out.read_text())
            if (stats["done"], stats["bytes_sent"]) != (1, size):
                raise SystemExit(f"upload {i} did not complete: {stats}")
            publish.append(stats["seconds"])
            stored = next((data_dir / "storage" / "demo").glob(f"*/step-{i}/model.pt"))
            if stored.stat().st_size != size:
                raise SystemExit("the stored file is not the checkpoint")
            stored.unlink()  # keep the disk free for the next repeat
        load_after = Path("/proc/loadavg").read_text().split()[:3]

        def rate(seconds: list[float]) -> str:
            best, median = min(seconds), statistics.median(seconds)
            return f"{size / best / 1e6:,.0f} MB/s best ({best:.1f} s), {size / median / 1e6:,.0f} MB/s median"

        print(f"machine: {platform.node()} {platform.machine()} {os.cpu_count()} cores, Python {platform.python_version()}")
        print(f"file: {size:,} bytes ({args.size_gb:g} GiB, sha256 {sha[:12]}...), written in {write_s:.1f} s; "
              f"chunks of {args.chunk_mb} MiB; repeat {args.repeat}")
        print(f"load average before: {' '.join(load_before)}, after: {' '.join(load_after)}\n")
        print("| measurement | result |")
        print("|---|---|")
        print(f"| sha256 of the file (one pass, this process) | {size / hash_s / 1e6:,.0f} MB/s ({hash_s:.1f} s) |")
        print(f"| publish: hash + upload + server verify + place | {rate(publish)} |")
    finally:
        if proc is not None:
            proc.terminate()
            proc.wait(timeout=30)
        if args.keep:
            print(f"kept {tmp}")
        else:
            shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
