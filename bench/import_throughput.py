"""Import throughput: ``runcast import`` of a TensorBoard directory and an MLflow run, against each tool's reader.

    .venv/bin/python bench/import_throughput.py [--points 1000000] [--tags 4] [--data-dir DIR] [--only tensorboard] [--events]

Makes (once, kept under ``--data-dir``) a TensorBoard run directory written by torch's
``SummaryWriter`` and an MLflow run in an SQLite store (MLflow 3's default) logged with
``MlflowClient.log_batch``, each ``--points`` points over ``--tags`` metrics. Then, for
each source:

* the tool's own reader alone: TensorBoard's ``EventAccumulator`` (``Reload`` and
  ``Scalars`` of every tag, all points kept), MLflow's ``get_metric_history`` of every
  metric;
* the import into a fresh embedded server (``runcast serve``, SQLite, on a free port):
  the importer's read phase (the source read and checked in memory), then the send
  phase (batches over HTTP within the limits the server's whoami gives, dense series as
  columns, as ``runcast import`` sends them; ``--events``: one event per step in batches of
  1000, as a server that does not say gets them), timed apart; the stored points are counted
  afterwards from the export.

Prints one markdown table; points/s counts the source's points (the server also stores
the steps' times, ``_timestamp``, which the last column does not count).
"""

from __future__ import annotations

import argparse
import os
import platform
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import httpx

ROOT = Path(__file__).resolve().parents[1]
BIN = Path(sys.executable).parent
T0 = 1_700_000_000.0


def loadavg() -> str:
    return Path("/proc/loadavg").read_text().split()[0]


def make_tensorboard(path: Path, points: int, tags: int) -> None:
    from torch.utils.tensorboard import SummaryWriter

    if path.exists() and any(path.rglob("*tfevents*")):
        return
    with SummaryWriter(str(path / "run")) as writer:
        for step in range(points // tags):
            for t in range(tags):
                writer.add_scalar(f"metric/{t}", 1.0 / (1 + step + t), step, walltime=T0 + step * 0.1)


def make_mlflow(path: Path, points: int, tags: int) -> str:
    from mlflow import MlflowClient
    from mlflow.entities import Metric

    marker = path / "run_id"
    if marker.exists():
        return marker.read_text()
    path.mkdir(parents=True, exist_ok=True)
    client = MlflowClient(tracking_uri=f"sqlite:///{path / 'mlflow.db'}")
    run_id = client.create_run(client.create_experiment("bench"), run_name="bench").info.run_id
    batch: list[Metric] = []
    for step in range(points // tags):
        for t in range(tags):
            batch.append(Metric(f"metric/{t}", 1.0 / (1 + step + t), int((T0 + step * 0.1) * 1000), step))
        if len(batch) >= 1000:
            client.log_batch(run_id, metrics=batch)
            batch = []
    if batch:
        client.log_batch(run_id, metrics=batch)
    client.set_terminated(run_id)
    marker.write_text(run_id)
    return run_id


def read_tensorboard(path: Path) -> int:
    from tensorboard.backend.event_processing import event_accumulator

    acc = event_accumulator.EventAccumulator(str(path / "run"), size_guidance={event_accumulator.SCALARS: 0})
    acc.Reload()
    return sum(len(acc.Scalars(tag)) for tag in acc.Tags()["scalars"])


def read_mlflow(path: Path, run_id: str) -> int:
    from mlflow import MlflowClient

    client = MlflowClient(tracking_uri=f"sqlite:///{path / 'mlflow.db'}")
    run = client.get_run(run_id)
    return sum(len(client.get_metric_history(run_id, key)) for key in run.data.metrics)


class Server:
    """``runcast serve`` in the embedded default on a fresh data dir, with a token of project ``bench``."""

    def __init__(self) -> None:
        self.data_dir = Path(tempfile.mkdtemp(prefix="rc-import-bench-"))
        env = {k: v for k, v in os.environ.items() if not k.startswith("RUNCAST_")}
        env["RUNCAST_DATA_DIR"] = str(self.data_dir)
        out = subprocess.run([str(BIN / "runcast"), "token", "create", "--project", "bench"], env=env,
                             capture_output=True, text=True, check=True)
        self.token = out.stdout.strip().splitlines()[-1]
        with socket_port() as port:
            self.url = f"http://127.0.0.1:{port}"
        self.log = open(self.data_dir / "serve.log", "w")  # noqa: SIM115 (the server's log; closed in stop())
        self.proc = subprocess.Popen([str(BIN / "runcast"), "serve", "--port", self.url.rsplit(":", 1)[1]], env=env,
                                     stdout=self.log, stderr=subprocess.STDOUT)
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            try:
                if httpx.get(f"{self.url}/healthz", timeout=2).status_code == 200:
                    return
            except httpx.HTTPError:
                time.sleep(0.3)
        raise RuntimeError(f"runcast serve did not start (log {self.data_dir / 'serve.log'})")

    def stored(self, run_id: str) -> int:
        with httpx.stream("GET", f"{self.url}/api/v1/runs/{run_id}/export", params={"format": "csv"},
                          headers={"Authorization": f"Bearer {self.token}"}, timeout=600) as response:
            return sum(chunk.count(b"\n") for chunk in response.iter_bytes()) - 1

    def stop(self) -> None:
        self.proc.terminate()
        self.proc.wait(timeout=60)
        self.log.close()
        shutil.rmtree(self.data_dir, ignore_errors=True)


class socket_port:
    def __enter__(self) -> int:
        import socket

        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        return self.sock.getsockname()[1]

    def __exit__(self, *exc: object) -> None:
        self.sock.close()


def run_import(source: str, per_event: bool) -> dict[str, float]:
    from runcast import importers
    from runcast.handshake import whoami
    from runcast.sender.transport import HttpTransport

    server = Server()
    try:
        started = time.perf_counter()
        runs = importers.read_all([source])
        read_s = time.perf_counter() - started
        plans = importers.plan_all(runs, importers.Target(project="bench"))
        transport = HttpTransport(server.url, server.token, timeout=120)
        started = time.perf_counter()
        limits = importers.Limits() if per_event else importers.Limits.of(whoami(server.url, server.token, None, 30))
        importers.send(plans, transport, limits=limits)
        send_s = time.perf_counter() - started
        transport.close()
        return {"read_s": read_s, "send_s": send_s, "points": sum(r.points for r in runs), "stored": server.stored(plans[0].run_id)}
    finally:
        server.stop()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--points", type=int, default=1_000_000)
    parser.add_argument("--tags", type=int, default=4)
    parser.add_argument("--data-dir", type=Path, default=Path(tempfile.gettempdir()) / "rc-import-bench-data")
    parser.add_argument("--only", choices=("tensorboard", "mlflow"))
    parser.add_argument("--events", action="store_true", help="send one event per step (no columns), 1000 a batch")
    args = parser.parse_args()
    sys.path.insert(0, str(ROOT / "trainer"))
    print(f"machine: {platform.machine()}, {os.cpu_count()} CPUs, Python {platform.python_version()}; "
          f"load average at start {loadavg()}", flush=True)
    rows = []
    if args.only in (None, "tensorboard"):
        tb = args.data_dir / f"tensorboard-{args.points}-{args.tags}"
        started = time.perf_counter()
        make_tensorboard(tb, args.points, args.tags)
        print(f"tensorboard data ready in {time.perf_counter() - started:.0f} s", flush=True)
        started = time.perf_counter()
        count = read_tensorboard(tb)
        reader_s = time.perf_counter() - started
        rows.append(("TensorBoard (SummaryWriter, 1 run)", "EventAccumulator", count, reader_s, run_import(str(tb), args.events)))
        print(f"tensorboard done, load {loadavg()}", flush=True)
    if args.only in (None, "mlflow"):
        ml = args.data_dir / f"mlflow-{args.points}-{args.tags}"
        started = time.perf_counter()
        run_id = make_mlflow(ml, args.points, args.tags)
        print(f"mlflow data ready in {time.perf_counter() - started:.0f} s", flush=True)
        started = time.perf_counter()
        count = read_mlflow(ml, run_id)
        reader_s = time.perf_counter() - started
        rows.append(("MLflow (SQLite store, 1 run)", "get_metric_history", count, reader_s, run_import(str(ml / "mlflow.db"), args.events)))
        print(f"mlflow done, load {loadavg()}", flush=True)

    print()
    print("| source | points | tool's reader alone | runcast read phase | send + store phase | import total | import / reader | points stored |")
    print("|---|---|---|---|---|---|---|---|")
    for source, reader, count, reader_s, imp in rows:
        total = imp["read_s"] + imp["send_s"]
        print(
            f"| {source} | {count:,} | {reader}: {reader_s:.1f} s ({count / reader_s:,.0f} points/s) "
            f"| {imp['read_s']:.1f} s ({imp['points'] / imp['read_s']:,.0f}/s) | {imp['send_s']:.1f} s "
            f"| **{total:.1f} s ({imp['points'] / total:,.0f} points/s)** | {total / reader_s:.1f}x | {imp['stored']:,} |"
        )
    print(f"\nload average at end {loadavg()}")


if __name__ == "__main__":
    main()
