"""Publishing a checkpoint between two processes that share nothing but HTTP.

``runcast serve`` (embedded default) runs with its own data directory; the trainer is
another process with its own working directory, home and spool. Neither can see the
other's files. A restart of either side in the middle of the upload continues from the
last chunk the server stored; the checkpoint is listed once, with the trainer's sha256.
"""

from __future__ import annotations

import hashlib
import json
import sys
import time
from pathlib import Path

import httpx
import pytest
from services import Process, child_env, free_port, wait_until

from artifacts.conftest import write_file

DRIVER = Path(__file__).with_name("upload_driver.py")
MIB = 1024 * 1024
SIZE = 24 * MIB + 123
CHUNK = MIB


def _token(processes, server_env) -> str:
    res = processes.cli("token", "create", "--project", "demo", **server_env)
    return [w for w in res.stdout.split() if w.startswith("rc_")][-1]


def _driver(processes, trainer: Path, server: str, token: str, ckpt: Path, out: Path, *extra: str, name: str) -> Process:
    env = child_env({"HOME": str(trainer), "RUNCAST_SPOOL_DIR": str(trainer / "spool"),
                     "PYTHONPATH": ":".join(sys.path)})
    proc = Process(name, [sys.executable, str(DRIVER), server, token, str(ckpt), "100", str(out), *extra], env,
                   processes.log_dir / f"{name}.log", cwd=trainer)
    processes.processes.append(proc)
    return proc


def _run_id(proc: Process) -> str:
    found: list[str] = []

    def printed() -> bool:
        proc_log = proc.log_path.read_text()
        found[:] = [line.split()[1] for line in proc_log.splitlines() if line.startswith("run ")]
        return bool(found)

    wait_until(printed, 60, "the driver's run id")
    return found[0]


def _staged(server_dir: Path) -> int:
    return sum(p.stat().st_size for p in (server_dir / "storage" / ".runcast-uploads").glob("*/*"))


def _wait_staged(server_dir: Path, at_least: int) -> int:
    wait_until(lambda: _staged(server_dir) >= at_least, 120, f"{at_least} bytes staged on the server")
    return _staged(server_dir)


def _check_published(url: str, token: str, run_id: str, sha: str) -> None:
    listed = httpx.get(f"{url}/api/v1/runs/{run_id}/checkpoints", headers={"Authorization": f"Bearer {token}"}, timeout=30).json()
    (ckpt,) = listed["checkpoints"]
    assert (ckpt["status"], ckpt["sha256"], ckpt["size"], ckpt["step"]) == ("available", sha, SIZE, 100)
    digest = hashlib.sha256()
    with httpx.stream("GET", f"{url}{ckpt['download_url']}", timeout=60) as res:
        for chunk in res.iter_bytes():
            digest.update(chunk)
    assert digest.hexdigest() == sha


@pytest.fixture
def sides(processes, tmp_path):
    server_dir, trainer_dir = tmp_path / "server", tmp_path / "trainer"
    server_dir.mkdir()
    trainer_dir.mkdir()
    env = {"RUNCAST_DATA_DIR": str(server_dir), "RUNCAST_UPLOAD_CHUNK_BYTES": str(CHUNK)}
    ckpt = trainer_dir / "out" / "model.pt"
    sha = write_file(ckpt, SIZE, 7)
    return server_dir, trainer_dir, env, ckpt, sha


@pytest.mark.slow
def test_server_killed_mid_upload_resumes_from_the_last_chunk(processes, sides):
    server_dir, trainer_dir, env, ckpt, sha = sides
    port = free_port()
    api = processes.start_api(port=port, **env)
    token = _token(processes, env)
    out = trainer_dir / "stats.json"
    driver = _driver(processes, trainer_dir, processes.api_url, token, ckpt, out, "", str(4 * MIB), name="trainer")
    run_id = _run_id(driver)
    before = _wait_staged(server_dir, 8 * MIB)
    api.kill()
    time.sleep(1.0)
    processes.start_api(port=port, name="api-restarted", **env)
    assert _staged(server_dir) >= before  # what was stored survived
    wait_until(lambda: out.exists(), 180, "the trainer to finish")
    stats = json.loads(out.read_text())
    assert (stats["done"], stats["failed"], stats["pending"]) == (1, 0, 0)
    assert SIZE <= stats["bytes_sent"] <= SIZE + 2 * CHUNK  # at most the chunks in flight went twice
    _check_published(processes.api_url, token, run_id, sha)
    assert _staged(server_dir) == 0


@pytest.mark.slow
def test_trainer_killed_mid_upload_resumes_from_the_last_chunk(processes, sides):
    server_dir, trainer_dir, env, ckpt, sha = sides
    processes.start_api(**env)
    token = _token(processes, env)
    first = _driver(processes, trainer_dir, processes.api_url, token, ckpt, trainer_dir / "first.json", "",
                    str(4 * MIB), name="trainer")
    run_id = _run_id(first)
    _wait_staged(server_dir, 8 * MIB)
    first.kill()
    stored = _staged(server_dir)
    out = trainer_dir / "second.json"
    _driver(processes, trainer_dir, processes.api_url, token, ckpt, out, run_id, name="trainer-resumed")
    wait_until(lambda: out.exists(), 180, "the resumed trainer to finish")
    stats = json.loads(out.read_text())
    assert (stats["done"], stats["failed"]) == (1, 0)
    assert stats["bytes_sent"] == SIZE - stored  # only what the server did not hold yet
    assert stats["bytes_done"] == SIZE
    _check_published(processes.api_url, token, run_id, sha)
