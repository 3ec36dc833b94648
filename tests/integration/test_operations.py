"""The operator's view from the operator's seat: a real server (embedded, and the production
stack with a worker in another process), the SDK ingesting, ``/metrics`` scraped and parsed
with prometheus-client's own parser, exact counts; and JSON logs carrying the run id."""

from __future__ import annotations

import json
import threading
import time
from pathlib import Path
from typing import Any

import httpx
import pytest
import runcast
from prometheus_client.parser import text_string_to_metric_families

PROJECT = "opsproj"
STEPS, KEYS = 120, 3
N = STEPS * KEYS


def scrape(url: str) -> tuple[str, dict[tuple[str, tuple[tuple[str, str], ...]], float]]:
    text = httpx.get(f"{url}/metrics", timeout=30).text
    samples = {}
    for family in text_string_to_metric_families(text):
        for s in family.samples:
            samples[(s.name, tuple(sorted(s.labels.items())))] = s.value
    return text, samples


def value(samples: dict[Any, float], name: str, **labels: str) -> float:
    return samples.get((name, tuple(sorted(labels.items()))), 0.0)


def wait_metric(url: str, check: Any, timeout: float = 60) -> dict[Any, float]:
    deadline = time.monotonic() + timeout
    while True:
        _, samples = scrape(url)
        if check(samples) or time.monotonic() > deadline:
            return samples
        time.sleep(0.2)


def ingest(url: str, token: str, tmp: Path, name: str, visibility: str) -> str:
    run = runcast.init(PROJECT, name, server=url, token=token, visibility=visibility, spool_dir=tmp / name,
                       flush_interval=0.1, batch_size=100)
    for step in range(STEPS):
        run.log({f"k{i}": step * 0.5 + i for i in range(KEYS)}, step=step)
    run.finish()
    return run.id


@pytest.fixture(params=["embedded", pytest.param("production", marks=pytest.mark.services)])
def server(request: pytest.FixtureRequest, tmp_path: Path) -> tuple[str, str]:
    """(url, token of PROJECT): ``runcast serve`` alone, or with PostgreSQL, Redis and a worker
    sharing one PROMETHEUS_MULTIPROC_DIR."""
    if request.param == "production":
        stack = request.getfixturevalue("stack")
        shared = tmp_path / "prom"
        shared.mkdir()
        stack.env["PROMETHEUS_MULTIPROC_DIR"] = str(shared)
        stack.start_worker()
        stack.start_api()
        return stack.api_url, stack.token(PROJECT)
    processes = request.getfixturevalue("processes")
    processes.env = {"RUNCAST_DATA_DIR": str(tmp_path / "data")}
    token = processes.cli("token", "create", "--project", PROJECT).stdout.strip().splitlines()[-1]
    processes.start_api()
    return processes.api_url, token


def test_metrics_count_exactly_what_was_ingested(server: tuple[str, str], tmp_path: Path) -> None:
    url, token = server
    private = ingest(url, token, tmp_path, "secret-run", "private")
    samples = wait_metric(url, lambda s: value(s, "runcast_ingest_points_stored_total") >= N
                          and value(s, "runcast_inbox_batches", state="pending") == 0
                          and value(s, "runcast_inbox_batches", state="stored") == 0
                          # the last batch (finished, no points) may still be in the worker's hands
                          and value(s, "runcast_ingest_lag_seconds_count")
                          >= value(s, "runcast_ingest_batches_accepted_total"))
    batches = value(samples, "runcast_ingest_batches_accepted_total")
    assert value(samples, "runcast_ingest_points_accepted_total") == N
    assert value(samples, "runcast_ingest_points_stored_total") == N
    assert batches >= 2  # run_started ... finished, in batches of at most 100 events
    # every accepted batch was stored once, its lag observed once; the route's histogram saw each 202
    assert value(samples, "runcast_ingest_lag_seconds_count") == batches
    assert value(samples, "runcast_http_request_duration_seconds_count",
                 method="POST", route="/api/v1/ingest", status="202") == batches
    assert value(samples, "runcast_inbox_batches", state="quarantined") == 0
    assert value(samples, "runcast_inbox_scrape_ok") == 1
    assert value(samples, "runcast_ingest_batches_rejected_total", reason="token") == 0

    # refused batches, by reason
    bad_token = httpx.post(f"{url}/api/v1/ingest", json={"v": 1, "events": []},
                           headers={"Authorization": "Bearer rc_nope"}, timeout=30)
    assert bad_token.status_code == 401
    bad_schema = httpx.post(f"{url}/api/v1/ingest", json={"v": 1, "events": [{"type": "metrics"}]},
                            headers={"Authorization": f"Bearer {token}"}, timeout=30)
    assert bad_schema.status_code == 422
    text, samples = scrape(url)
    assert value(samples, "runcast_ingest_batches_rejected_total", reason="token") == 1
    assert value(samples, "runcast_ingest_batches_rejected_total", reason="schema") == 1
    assert value(samples, "runcast_ingest_batches_accepted_total") == batches  # nothing half-written
    # a private run's id and its project's name appear nowhere (labels are route templates)
    assert private not in text and PROJECT not in text and "secret-run" not in text


def test_a_live_viewer_shows_in_the_sse_gauge(server: tuple[str, str], tmp_path: Path) -> None:
    url, token = server
    public = ingest(url, token, tmp_path, "public-run", "public")
    assert value(scrape(url)[1], "runcast_sse_viewers") == 0
    connected, stop = threading.Event(), threading.Event()

    def watch() -> None:
        with httpx.stream("GET", f"{url}/api/v1/runs/{public}/stream", timeout=30) as response:
            assert response.status_code == 200
            connected.set()
            for _ in response.iter_bytes():
                if stop.is_set():
                    return

    viewer = threading.Thread(target=watch, daemon=True)
    viewer.start()
    assert connected.wait(30)
    samples = wait_metric(url, lambda s: value(s, "runcast_sse_viewers") == 1)
    assert value(samples, "runcast_sse_viewers") == 1
    text, _ = scrape(url)
    assert public not in text
    stop.set()
    # the stream's next keep-alive or frame ends the reader; the client's disconnect leaves the gauge
    httpx.post(f"{url}/api/v1/ingest", json={"v": 1, "events": []},
               headers={"Authorization": f"Bearer {token}"}, timeout=30)
    viewer.join(40)
    samples = wait_metric(url, lambda s: value(s, "runcast_sse_viewers") == 0, timeout=40)
    assert value(samples, "runcast_sse_viewers") == 0
    assert value(samples, "runcast_http_request_duration_seconds_count",
                 method="GET", route="/api/v1/runs/{run_id}/stream", status="200") == 1


def test_metrics_token_guards_the_endpoint(processes: Any, tmp_path: Path) -> None:
    processes.env = {"RUNCAST_DATA_DIR": str(tmp_path / "data"), "RUNCAST_METRICS_TOKEN": "s3cret"}
    processes.start_api()
    url = processes.api_url
    assert httpx.get(f"{url}/metrics", timeout=30).status_code == 401
    assert httpx.get(f"{url}/metrics", headers={"Authorization": "Bearer wrong"}, timeout=30).status_code == 401
    ok = httpx.get(f"{url}/metrics", headers={"Authorization": "Bearer s3cret"}, timeout=30)
    assert ok.status_code == 200 and "runcast_ingest_batches_accepted_total" in ok.text


def test_json_logs_carry_the_run_id(processes: Any, tmp_path: Path) -> None:
    processes.env = {"RUNCAST_DATA_DIR": str(tmp_path / "data"), "RUNCAST_LOG_FORMAT": "json"}
    token = processes.cli("token", "create", "--project", PROJECT).stdout.strip().splitlines()[-1]
    processes.start_api()
    run_id = ingest(processes.api_url, token, tmp_path, "logged-run", "private")
    processes.stop()
    # the test helper heads the file with "$ <command line>"; every line after it is the server's
    lines = [line for line in (processes.log_dir / "api.log").read_text().splitlines()[1:] if line.strip()]
    records = [json.loads(line) for line in lines]  # every line is one JSON object
    assert all({"ts", "level", "logger", "message"} <= r.keys() for r in records)
    accepted = [r for r in records
                if r["logger"] == "runcast_server.inbox.accept" and r["message"].startswith("ingest: accepted")]
    stored = [r for r in records if r["logger"] == "runcast_server.tasks" and r["message"].startswith("ingest: inbox")]
    assert accepted and stored
    assert all(r["run_id"] == run_id for r in accepted + stored)
