"""`runcast demo`: one command serves the dashboard and streams a real training run; Ctrl-C stops it all."""

from __future__ import annotations

import os
import signal
import subprocess
from pathlib import Path

import httpx
import pytest
from runcast.wire.events import EVENT_TYPES
from services import BIN, child_env, free_port, wait_until

pytestmark = pytest.mark.slow


def descendants(pid: int) -> set[int]:
    """Every live process below ``pid`` (from /proc)."""
    children: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                ppid = int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1])
            except (OSError, IndexError, ValueError):
                continue
            children.setdefault(ppid, []).append(int(entry.name))
    out, todo = set(), [pid]
    while todo:
        for child in children.get(todo.pop(), []):
            out.add(child)
            todo.append(child)
    return out


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    stat = Path(f"/proc/{pid}/stat")
    return stat.exists() and stat.read_text().rsplit(")", 1)[1].split()[0] != "Z"


def start_demo(tmp_path: Path, port: int, *args: str) -> subprocess.Popen[str]:
    log = open(tmp_path / f"demo-{port}.log", "w")  # noqa: SIM115 - closed with the test's tmp dir
    return subprocess.Popen(
        [str(BIN / "runcast"), "demo", "--port", str(port), "--data-dir", str(tmp_path / "demo"), *args],
        env=child_env({}), stdout=log, stderr=subprocess.STDOUT, text=True,
    )  # fmt: skip


def test_demo_trains_streams_and_stops_cleanly_on_ctrl_c(tmp_path: Path) -> None:
    port = free_port()
    demo = start_demo(tmp_path, port, "--steps", "30")
    api = httpx.Client(base_url=f"http://127.0.0.1:{port}/api/v1", timeout=10)
    try:
        def run_with_points() -> dict | None:
            assert demo.poll() is None, (tmp_path / f"demo-{port}.log").read_text()
            runs = api.get("/runs").json()["runs"]
            return runs[0] if runs and runs[0]["last_values"].get("train/loss") else None

        run = wait_until(run_with_points, 240, "the demo run to have points", interval=0.5)
        assert run["project"] == "demo"
        kids = descendants(demo.pid)
        assert kids, "the trainer runs as a child process"
        log = (tmp_path / f"demo-{port}.log").read_text()
        assert f"http://127.0.0.1:{port}/runs/{run['id']}" in log
        assert httpx.get(f"http://127.0.0.1:{port}/runs/{run['id']}", timeout=10).status_code == 200
        # The token it prints is one of its own database: a script of the user's can log with it.
        line = next(ln for ln in log.splitlines() if "export RUNCAST_SERVER=" in ln)
        assert f"RUNCAST_SERVER=http://127.0.0.1:{port} " in line
        token = line.split("RUNCAST_TOKEN=", 1)[1].strip()
        mine = api.get("/whoami", headers={"Authorization": f"Bearer {token}"})
        assert mine.status_code == 200 and mine.json() == {"project": "demo", "run": None, "max_batch_events": 20_000,
                                                            "max_body_bytes": 8 * 1024 * 1024,
                                                            "event_types": list(EVENT_TYPES),
                                                            "scopes": ["read", "ingest", "team"]}  # a full token

        # A live viewer is connected when Ctrl-C comes: the stream must not hold up shutdown.
        with httpx.stream("GET", f"http://127.0.0.1:{port}/api/v1/runs/{run['id']}/stream", timeout=10) as stream:
            assert stream.status_code == 200
            demo.send_signal(signal.SIGINT)
            assert demo.wait(timeout=60) == 0
        assert not [pid for pid in kids if alive(pid)], "processes left behind"
        out = (tmp_path / f"demo-{port}.log").read_text()
        assert "stopped" in out.splitlines()[-1]
    finally:
        api.close()
        if demo.poll() is None:
            demo.kill()
            demo.wait()

    # Data persists: a second demo (serving only) lists the first run, finished or killed.
    port2 = free_port()
    again = start_demo(tmp_path, port2, "--no-train")
    try:
        url = f"http://127.0.0.1:{port2}/api/v1/runs"
        runs = wait_until(lambda: httpx.get(url, timeout=5).json()["runs"], 60, "the second demo to serve")
        assert [(r["id"], r["status"] in ("killed", "finished")) for r in runs] == [(run["id"], True)]
        again.send_signal(signal.SIGTERM)
        assert again.wait(timeout=30) == 0
    finally:
        if again.poll() is None:
            again.kill()
            again.wait()
