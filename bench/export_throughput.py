"""Export throughput: a run's full history through ``GET /runs/{id}/export`` per format.

    .venv/bin/python bench/export_throughput.py [--points 1000000 10000000] [--formats jsonl csv parquet]
        [--data-dir DIR] [--repeat 1] [--time-every 100]

For each ``--points`` N, makes (once, kept under ``--data-dir``) an embedded database
(SQLite, migrated to head) holding one run with one series of N points (the rows
written straight into ``points``: this measures the read, not the ingest) and, with
``--time-every K``, its segment's ``_timestamp`` series with a point every K steps (a trainer
at 1000 steps/s whose times ingest keeps one per tenth of a second: K = 100), starts
``runcast serve`` on it on a free port, and downloads the export with httpx, streamed,
counting the rows the client received (JSONL/CSV lines; Parquet: the file's row count,
read with pyarrow after the clock stops). Prints one markdown table per N, with the CPU
seconds the server process and the client spent (from /proc and ``process_time``): on a
shared, loaded machine the wall time mostly measures the queue for a core, the CPU
seconds what the export costs.

End to end: the request, the server's keyset pages, the encoding, loopback HTTP and
the client reading every byte.
"""

from __future__ import annotations

import argparse
import io
import os
import platform
import socket
import sqlite3
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import httpx

BIN = Path(sys.executable).parent
RUN_ID = "benchexport0001"


def loadavg() -> str:
    return " ".join(Path("/proc/loadavg").read_text().split()[:3])


def fill(data_dir: Path, points: int, time_every: int) -> float:
    """The database with one run of ``points`` points (and a time point every ``time_every``
    steps, none if 0); returns the seconds it took (0 if kept)."""
    from runcast_server.core import migrate

    db = data_dir / "runcast.db"
    marker = data_dir / "filled"
    if marker.exists() and marker.read_text() == f"{points} {time_every}":
        return 0.0
    data_dir.mkdir(parents=True, exist_ok=True)
    db.unlink(missing_ok=True)
    started = time.perf_counter()
    migrate.upgrade(f"sqlite:///{db}")
    con = sqlite3.connect(db)
    now = time.time()
    con.execute("INSERT INTO projects (id, name, created_at) VALUES (1, 'bench', ?)", (now,))
    con.execute(
        "INSERT INTO runs (id, project_id, name, visibility, public_paths, status, config, code, env, created_at,"
        " last_values, version) VALUES (?, 1, 'export', 'public', 0, 'finished', '{}', '{}', '{}', ?, '{}', 1)",
        (RUN_ID, now),
    )
    con.execute("INSERT INTO segments (id, run_id, uid, \"index\", start_step, resumed, lost_events)"
                " VALUES (1, ?, 'seg', 0, 0, 0, 0)", (RUN_ID,))
    con.execute("INSERT INTO series (id, run_id, segment_id, key, count, min_step, max_step)"
                " VALUES (1, ?, 1, 'train/loss', ?, 0, ?)", (RUN_ID, points, points - 1))
    batch = 1_000_000
    for start in range(0, points, batch):
        con.executemany(
            "INSERT INTO points (series_id, step, value, version) VALUES (1, ?, ?, 1)",
            ((s, 2.0 / (1.0 + s * 1e-4) + (s % 97) * 1e-3) for s in range(start, min(points, start + batch))),
        )
        con.commit()
    if time_every:
        con.execute("INSERT INTO series (id, run_id, segment_id, key, count, min_step, max_step)"
                    " VALUES (2, ?, 1, '_timestamp', ?, 0, ?)", (RUN_ID, -(-points // time_every), points - 1))
        con.executemany("INSERT INTO points (series_id, step, value, version) VALUES (2, ?, ?, 1)",
                        ((s, now + s / 1000) for s in range(0, points, time_every)))
        con.commit()
    con.close()
    marker.write_text(f"{points} {time_every}")
    return time.perf_counter() - started


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def serve(data_dir: Path) -> tuple[subprocess.Popen[bytes], str]:
    port = free_port()
    env = {k: v for k, v in os.environ.items() if not k.startswith("RUNCAST_")}
    env["RUNCAST_DATA_DIR"] = str(data_dir)
    log = open(data_dir / "serve.log", "wb")  # noqa: SIM115 - kept open for the process's life
    proc = subprocess.Popen([str(BIN / "runcast"), "serve", "--host", "127.0.0.1", "--port", str(port)],
                            env=env, stdout=log, stderr=subprocess.STDOUT)
    url = f"http://127.0.0.1:{port}"
    deadline = time.time() + 120
    while time.time() < deadline:
        try:
            if httpx.get(f"{url}/healthz", timeout=2).status_code == 200:
                return proc, url
        except httpx.HTTPError:
            time.sleep(0.3)
    proc.kill()
    raise SystemExit(f"runcast serve did not start: see {data_dir / 'serve.log'}")


def cpu_seconds(pid: int) -> float:
    """User + system CPU seconds of process ``pid`` so far (from /proc)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def download(url: str, fmt: str, server_pid: int) -> tuple[float, int, int, float, float]:
    """(seconds, bytes, rows, server CPU s, client CPU s) of one export, streamed."""
    size = lines = 0
    parts: list[bytes] = []
    server_cpu, client_cpu = cpu_seconds(server_pid), time.process_time()
    started = time.perf_counter()
    with httpx.stream("GET", f"{url}/api/v1/runs/{RUN_ID}/export", params={"format": fmt},
                      timeout=httpx.Timeout(600.0)) as response:
        response.raise_for_status()
        for chunk in response.iter_bytes():
            size += len(chunk)
            if fmt == "parquet":
                parts.append(chunk)
            else:
                lines += chunk.count(b"\n")
    elapsed = time.perf_counter() - started
    server_cpu, client_cpu = cpu_seconds(server_pid) - server_cpu, time.process_time() - client_cpu
    if fmt == "parquet":
        import pyarrow.parquet as pq

        rows = pq.ParquetFile(io.BytesIO(b"".join(parts))).metadata.num_rows
    else:
        rows = lines - (1 if fmt == "csv" else 0)
    return elapsed, size, rows, server_cpu, client_cpu


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--points", type=int, nargs="+", default=[1_000_000, 10_000_000])
    parser.add_argument("--formats", nargs="+", default=["parquet", "jsonl", "csv"])
    parser.add_argument("--data-dir", type=Path, default=Path(tempfile.gettempdir()) / "runcast-bench-export")
    parser.add_argument("--repeat", type=int, default=1, help="Downloads per format (the best is kept).")
    parser.add_argument("--time-every", type=int, default=100,
                        help="A _timestamp point every K steps (0: no times, every row's time null).")
    args = parser.parse_args()
    print(f"machine: {platform.node()} {platform.machine()}, {os.cpu_count()} cores; python {platform.python_version()}")
    for points in args.points:
        data_dir = args.data_dir / f"points-{points}-times-{args.time_every}"
        filled = fill(data_dir, points, args.time_every)
        times = f"a time point every {args.time_every} steps" if args.time_every else "no times"
        print(f"\n### {points:,} points (one series, {times}){f'; filled in {filled:.0f} s' if filled else ' (data kept)'}")
        print(f"load average before: {loadavg()}\n")
        proc, url = serve(data_dir)
        try:
            print("| format | seconds | points/s | server CPU s | client CPU s | points per CPU s | MB "
                  "| rows received | load (1 min) |")
            print("|---|---:|---:|---:|---:|---:|---:|---:|---:|")
            for fmt in args.formats:
                best = min((download(url, fmt, proc.pid) for _ in range(args.repeat)), key=lambda r: r[0])
                seconds, size, rows, server_cpu, client_cpu = best
                status = "" if rows == points else f" (expected {points})"
                print(f"| {fmt} | {seconds:.2f} | {points / seconds:,.0f} | {server_cpu:.2f} | {client_cpu:.2f} "
                      f"| {points / (server_cpu + client_cpu):,.0f} | {size / 1e6:.1f} | {rows:,}{status} "
                      f"| {loadavg().split()[0]} |", flush=True)
        finally:
            proc.terminate()
            proc.wait(30)


if __name__ == "__main__":
    main()
