"""Production mode: while another project sends poison (the inputs that used to kill the worker,
break a run's page for good or lose a batch silently), a healthy run's ingest goes on and every
one of its points is stored exactly once; the worker process is the same one at the end.

PostgreSQL, Redis, a Celery worker (prefork, the pool whose parent used to die pickling a deep
config) and `runcast serve` are real processes.
"""

from __future__ import annotations

import json
import threading

import httpx
import pytest
from runcast.wire import events as ev

from integration.helpers import Driver, export_rows, wait_points

pytestmark = pytest.mark.slow

STEPS = 3000


def _poison(api: str, token: str, victim: str) -> list[tuple[str, int, dict]]:
    """Every poison request once; returns (what, status, body)."""
    auth = {"Authorization": f"Bearer {token}", "Content-Type": "application/json"}
    run, seg = ev.new_id(), ev.new_id()
    head = {"v": 1, "type": "run_started", "run": run, "segment": seg, "seq": 0, "ts": 1.0,
            "project": "attacker", "name": "poison"}

    def batch(*events: dict) -> str:
        return json.dumps({"v": 1, "events": list(events)}, ensure_ascii=True)

    def deep(depth: int) -> str:
        return '{"v":1,"events":[' + json.dumps(head)[:-1] + ',"config":' + '{"a":' * depth + "1" + "}" * depth + "}]}"

    metric = {"v": 1, "type": "metrics", "run": run, "segment": seg, "seq": 1, "ts": 1.0, "step": 1}
    cases = [
        ("config 480 deep", "POST", "/api/v1/ingest", deep(480)),
        ("config 977 deep", "POST", "/api/v1/ingest", deep(977)),
        ("config 100000 deep", "POST", "/api/v1/ingest", deep(100_000)),
        ("lone surrogate metric", "POST", "/api/v1/ingest", batch(head, {**metric, "values": {"\ud800": 1.0, "ok": 2.0}})),
        ("lone surrogate name", "POST", "/api/v1/ingest", batch({**head, "name": "\ud800"})),
        ("NUL note", "POST", "/api/v1/ingest", batch(head, {**metric, "type": "note", "text": "a\x00b"})),
        ("step 2^53", "POST", "/api/v1/ingest", batch(head, {**metric, "step": 2**53, "values": {"a": 1}})),
        ("seed 2^63", "POST", "/api/v1/ingest", batch({**head, "seed": 2**63})),
        ("50 MB ingest", "POST", "/api/v1/ingest", "x" * (50 << 20)),
        ("50 MB subscription", "POST", "/api/v1/subscriptions", "x" * (50 << 20)),
    ]
    out = []
    with httpx.Client(base_url=api, timeout=120) as http:
        for what, method, path, body in cases:
            res = http.request(method, path, content=body.encode(), headers=auth)
            out.append((what, res.status_code, res.json()))
        for what, path, params in [
            ("segment 2^31", "/api/v1/runs/{run}/metrics", {"key": "loss", "segment": str(2**31)}),
            ("segment 2^31 events", "/api/v1/runs/{run}/events", {"segment": str(2**31)}),
            ("after 2^64", "/api/v1/runs/{run}/events", {"after": str(2**64)}),
            ("start 2^64", "/api/v1/runs/{run}/metrics", {"key": "loss", "start": str(2**64)}),
        ]:
            res = http.get(path.format(run=victim), params=params)
            out.append((what, res.status_code, res.json()))
    return out


def test_poison_is_refused_while_another_run_is_stored_exactly_once(stack):
    stack.start_worker(concurrency=2, pool="prefork")
    stack.start_api()
    worker = stack.processes[0]
    api = stack.api_url
    good_token, bad_token = stack.token("healthy"), stack.token("attacker")
    driver = Driver(stack, server=api, token=good_token, project="healthy", steps=STEPS, metrics=4,
                    extra=["--sleep", "0.002"])
    results: list[tuple[str, int, dict]] = []
    attacker = threading.Thread(target=lambda: results.extend(_poison(api, bad_token, driver.run_id)))
    attacker.start()
    attacker.join(timeout=600)
    assert not attacker.is_alive()
    for what, status, body in results:
        assert 400 <= status < 500, (what, status, body)
        assert body["error"]["message"] and body["error"].get("field"), (what, body)
    assert len(results) == 14

    driver.wait()
    # finish() returns once every batch is accepted (in the inbox); the worker stores them after.
    wait_points(stack.engine, driver.run_id, STEPS * 4, timeout=120, procs=[worker])
    rows = export_rows(api, driver.run_id)
    assert len(rows) == STEPS * 4
    assert len({(r["key"], r["step"]) for r in rows}) == STEPS * 4
    worker.check_alive("after the poison")
    assert worker.running and "Traceback" not in worker.output()
    assert httpx.get(f"{api}/api/v1/runs/{driver.run_id}", timeout=30).status_code == 200
    assert httpx.get(f"{api}/api/v1/runs", params={"project": "attacker"}, timeout=30).json()["runs"] == []
