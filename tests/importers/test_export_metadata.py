"""``runcast export`` then ``runcast import`` into a second server keeps the run, not only its points."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
import services

from importers.tools import runcast_cli

T0 = 1_700_000_000.0
RUN = "exportsource01"
# What must come back as it was (GET /api/v1/runs/{id}); the segments without their spool bookkeeping.
KEPT = ("name", "status", "started_at", "finished_at", "config", "summary", "metrics", "tags", "group", "job_type",
        "notes", "seed", "last_step", "keys")


def _event(kind: str, segment: str, seq: int, ts: float, **body: Any) -> dict[str, Any]:
    return {"v": 1, "type": kind, "run": RUN, "segment": segment, "seq": seq, "ts": ts, **body}


def _started(segment: str, ts: float, resume_step: int | None) -> dict[str, Any]:
    return _event("run_started", segment, 0, ts, project="demo", name="lr sweep / 3", config={"lr": 3e-4, "layers": [4, 8], "opt": None},
                  code={}, env={}, seed=7, resume_step=resume_step, visibility="private", tags=["sweep", "fp32"],
                  group="sweep-7", job_type="train", notes="the third try\nwith warmup")


def _write_source(url: str, token: str) -> None:
    """A private run of two segments (the second resumed at step 10, logging from step 15), a summary, declared metrics."""
    batch = [
        _started("seg-zero-000", T0, None),
        *[_event("metrics", "seg-zero-000", s, T0 + s, step=s, values={"train/loss": 3.0 / s}) for s in range(1, 13)],
        _event("update", "seg-zero-000", 20, T0 + 12, summary={"best": {"loss": 0.25}},
               define={"train/loss": {"x": "step", "summary": "min"}}),
        _started("seg-one-0001", T0 + 100, 10),
        *[_event("metrics", "seg-one-0001", s, T0 + 100 + s, step=s, values={"train/loss": 2.0 / s}) for s in range(15, 20)],
        _event("finished", "seg-one-0001", 30, T0 + 130, step=19, status="failed"),
    ]
    response = httpx.post(f"{url}/api/v1/ingest", json={"v": 1, "events": batch},
                          headers={"Authorization": f"Bearer {token}"}, timeout=30)
    assert response.status_code == 202, response.text


def _run(url: str, run_id: str, token: str) -> dict[str, Any]:
    response = httpx.get(f"{url}/api/v1/runs/{run_id}", headers={"Authorization": f"Bearer {token}"}, timeout=30)
    assert response.status_code == 200, response.text
    return response.json()


def _stored(url: str, run_id: str, token: str, status: str) -> dict[str, Any]:
    deadline = time.monotonic() + 30
    while True:
        response = httpx.get(f"{url}/api/v1/runs/{run_id}", headers={"Authorization": f"Bearer {token}"}, timeout=30)
        if response.status_code == 200 and response.json()["status"] == status:
            return response.json()
        assert time.monotonic() < deadline, response.text
        time.sleep(0.2)


def _kept(run: dict[str, Any]) -> dict[str, Any]:
    segments = [{k: s[k] for k in ("index", "start_step", "resumed", "started_at", "last_step")} for s in run["segments"]]
    return {**{k: run[k] for k in KEPT}, "segments": segments}


@pytest.fixture
def second_server(tmp_path: Path) -> Iterator[tuple[str, str]]:
    """Another ``runcast serve`` with its own data dir, and a token of its project ``demo``."""
    env = {"RUNCAST_DATA_DIR": str(tmp_path / "second-data")}
    token = services.create_token(env, "demo")
    proc, url = services.start_api(env, tmp_path / "second.log")
    try:
        yield url, token
    finally:
        proc.stop()


@pytest.mark.parametrize("fmt", ["jsonl", "csv"])
def test_export_then_import_into_another_server_keeps_the_run(hub, server, second_server, tmp_path, fmt):
    token = hub.token()
    _write_source(server, token)
    source = _stored(server, RUN, token, "failed")
    out = tmp_path / f"run.{fmt}"

    exported = runcast_cli("export", RUN, "--server", server, "--token", token, "--format", fmt, "-o", str(out))

    assert exported.returncode == 0, exported.stderr
    assert (tmp_path / "run.run.json").is_file()
    url, other = second_server
    imported = runcast_cli("import", str(out), "--server", url, "--token", other, "--visibility", "private")
    assert imported.returncode == 0, imported.stderr
    run_id = imported.stdout.split()[1]
    copy = _stored(url, run_id, other, "failed")
    assert _kept(copy) == _kept(source)
    assert copy["segments"][1]["start_step"] == 10 and copy["tags"] == ["fp32", "sweep"]
    again = runcast_cli("export", run_id, "--server", url, "--token", other, "--format", fmt, "-o", str(tmp_path / f"again.{fmt}"))
    assert again.returncode == 0, again.stderr
    assert (tmp_path / f"again.{fmt}").read_bytes() == out.read_bytes()
    listed = httpx.get(f"{url}/api/v1/runs", params={"tag": "sweep", "group": "sweep-7"},
                       headers={"Authorization": f"Bearer {other}"}, timeout=30).json()["runs"]
    assert [r["id"] for r in listed] == [run_id]


def test_a_bad_run_file_names_the_field_and_sends_nothing(hub, server, tmp_path):
    token = hub.token()
    _write_source(server, token)
    _stored(server, RUN, token, "failed")
    out = tmp_path / "run.jsonl"
    assert runcast_cli("export", RUN, "--server", server, "--token", token, "-o", str(out)).returncode == 0
    described = json.loads((tmp_path / "run.run.json").read_text())
    described["segments"][1]["start_step"] = -1
    (tmp_path / "run.run.json").write_text(json.dumps(described))

    res = runcast_cli("import", str(out), "--server", server, "--token", token)

    assert res.returncode == 1 and res.stdout == ""
    assert res.stderr.startswith(f"error: {tmp_path / 'run.run.json'}: ") and "'segments.1.start_step' -1" in res.stderr, res.stderr
    assert [r["id"] for r in hub.runs()] == [RUN]


def test_another_projects_token_exports_nothing_of_a_private_run(hub, server, tmp_path):
    _write_source(server, hub.token())
    _stored(server, RUN, hub.token(), "failed")
    out = tmp_path / "run.jsonl"

    res = runcast_cli("export", RUN, "--server", server, "--token", hub.token("other"), "-o", str(out))

    assert res.returncode == 3, res.stderr
    assert not out.exists() and not (tmp_path / "run.run.json").exists()
