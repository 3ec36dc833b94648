"""Parquet downloads while a run is written, on the embedded SQLite of a real ``runcast serve``.

A second copy of the SQLite library in the server (ADBC's SQLite driver read Parquet pages
until 2026-12-05) drops the server's own locks on the database file whenever it closes it:
within seconds the server's writes failed with "disk I/O error" (503) and exports broke off
mid-stream. Two threads download Parquet while two write (ingest and a rate-limited
sign-in) for a few seconds; every answer must be a normal one and every point stored.
"""

from __future__ import annotations

import io
import subprocess
import threading
import time
from collections import Counter
from pathlib import Path

import httpx
import pyarrow.parquet as pq
from runcast.wire import events as ev
from services import BIN, child_env, start_api

from integration.helpers import WireRun

SECONDS = 8.0


def test_parquet_downloads_while_writing_break_nothing(tmp_path: Path) -> None:
    env = {"RUNCAST_DATA_DIR": str(tmp_path / "data")}
    token = subprocess.run([str(BIN / "runcast"), "token", "create", "--project", "p"], env=child_env(env),
                           capture_output=True, text=True, timeout=60, check=True).stdout.split()[-1]
    proc, base = start_api(env, tmp_path / "api.log")
    try:
        run = WireRun("p", "r")
        auth = {"Authorization": f"Bearer {token}", "Content-Type": "application/json"}
        first = [run.started()] + [run.metrics(step, {"loss": 1.0 / (step + 1)}) for step in range(500)]
        assert httpx.post(f"{base}/api/v1/ingest", content=ev.dumps_batch(first), headers=auth, timeout=30).status_code == 202
        answers: Counter[str] = Counter()
        written: list[int] = []
        stop = time.monotonic() + SECONDS

        def export() -> None:
            with httpx.Client(base_url=base, timeout=30) as client:
                while time.monotonic() < stop:
                    try:
                        res = client.get(f"/api/v1/runs/{run.run}/export", params={"format": "parquet", "key": "loss"})
                        answers[f"export {res.status_code}"] += 1
                        if res.status_code == 200:
                            pq.read_table(io.BytesIO(res.content))  # a whole file, footer included
                    except Exception as exc:  # noqa: BLE001 - counted, and the assertion names it
                        answers[f"export broken: {type(exc).__name__}"] += 1

        def write(offset: int) -> None:
            with httpx.Client(base_url=base, timeout=30) as client:
                step = 1000 + offset
                while time.monotonic() < stop:
                    res = client.post("/api/v1/ingest", headers=auth,
                                      content=ev.dumps_batch([run.metrics(step, {"loss": 0.5})]))
                    answers[f"ingest {res.status_code}"] += 1
                    if res.status_code == 202:
                        written.append(step)
                    step += 2
                    answers[f"sign-in {client.post('/api/v1/session', json={'token': 'rc_wrong'}).status_code}"] += 1

        threads = [threading.Thread(target=export) for _ in range(2)]
        threads += [threading.Thread(target=write, args=(n,)) for n in range(2)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        log = (tmp_path / "api.log").read_text(errors="replace").splitlines()
        assert set(answers) <= {"export 200", "ingest 202", "sign-in 401", "sign-in 429"}, (answers, log[-40:])
        assert answers["export 200"] > 10 and answers["ingest 202"] > 10, answers
        stored = httpx.get(f"{base}/api/v1/runs/{run.run}/metrics", params={"key": "loss", "max_points": 20_000}, timeout=30).json()
        assert stored["level"] == 0 and stored["series"][0]["step"] == list(range(500)) + sorted(written)
        assert "disk I/O" not in (tmp_path / "api.log").read_text()
    finally:
        proc.stop(timeout=20)
