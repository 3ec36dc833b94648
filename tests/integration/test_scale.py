"""Scale: a 100,000-step run with 8 metrics through the SDK is stored and readable in full."""

from __future__ import annotations

import time

import httpx
import pytest

from integration.helpers import (
    Driver,
    export_count,
    point_count,
    raw_metric,
    same,
    value_at,
    wait_points,
)

STEPS, METRICS = 100_000, 8


@pytest.mark.slow
@pytest.mark.timeout(1500)
def test_100k_steps_8_metrics(stack, record_property):
    stack.start_worker(name="worker-0")
    stack.start_worker(name="worker-1")
    stack.start_api()
    token = stack.token("scale")
    t0 = time.monotonic()
    driver = Driver(stack, server=stack.api_url, token=token, project="scale", name="sdk",
                    steps=STEPS, metrics=METRICS)
    done = driver.wait(timeout=1200)
    wait_points(stack.engine, driver.run_id, STEPS * METRICS, timeout=1200, procs=stack.processes[:2])
    ingest_s = time.monotonic() - t0
    assert point_count(stack.engine, driver.run_id) == STEPS * METRICS

    t1 = time.monotonic()
    assert export_count(stack.api_url, driver.run_id, token) == STEPS * METRICS
    export_s = time.monotonic() - t1

    # Overview of the whole run from rollups, and a raw window, both exact where they must be.
    r = httpx.get(f"{stack.api_url}/api/v1/runs/{driver.run_id}/metrics",
                  params={"key": "m7", "max_points": 2000}, timeout=60)
    r.raise_for_status()
    body = r.json()
    assert body["level"] > 0
    [series] = body["series"]
    assert sum(series["count"]) == STEPS
    assert 0 < len(series["step"]) <= 2000 * 2
    raw = raw_metric(stack.api_url, driver.run_id, "m5", 54_321, 56_320, token)
    assert [s for s, _ in raw] == list(range(54_321, 56_321))
    assert all(same(v, value_at(s, 5)) for s, v in raw)
    record_property("sdk_log_s", done["log_s"])
    record_property("ingest_s", round(ingest_s, 1))
    record_property("export_s", round(export_s, 1))
    print(f"sdk log {done['log_s']}s, stored after {ingest_s:.1f}s, export {export_s:.1f}s")
