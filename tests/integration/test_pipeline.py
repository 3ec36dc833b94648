"""Production mode end to end: SDK → API → inbox → Celery worker → PostgreSQL → REST reads.

Every value is compared exactly, NaN and ±Inf included.
"""

from __future__ import annotations

import math

import pytest

from integration.helpers import (
    SPECIAL,
    Driver,
    WireRun,
    celery_client,
    export_rows,
    get_run,
    post_batch,
    raw_metric,
    same,
    send_batch_task,
    value_at,
    wait_points,
)

STEPS = 300
METRICS = 3


def expected_values(steps: int = STEPS, metrics: int = METRICS, start: int = 0) -> dict[tuple[str, int], float]:
    out = {}
    for step in range(start, start + steps):
        for k in range(metrics):
            out[(f"m{k}", step)] = value_at(step, k)
        if step in SPECIAL:
            out[("m0", step)] = SPECIAL[step]
    return out


def assert_export_exact(rows: list[dict], expected: dict[tuple[str, int], float]) -> None:
    got: dict[tuple[str, int], float] = {}
    for row in rows:
        k = (row["key"], row["step"])
        assert k not in got, f"point {k} exported twice"
        got[k] = row["value"]
    assert set(got) == set(expected), (
        f"missing {sorted(set(expected) - set(got))[:5]}, extra {sorted(set(got) - set(expected))[:5]}"
    )
    wrong = [(k, got[k], v) for k, v in expected.items() if not same(got[k], v)]
    assert not wrong, f"{len(wrong)} values differ, e.g. {wrong[:5]}"


def assert_round_trip(stack, run_id: str, token: str) -> None:
    expected = expected_values()
    wait_points(stack.engine, run_id, len(expected), procs=stack.processes[:1])
    rows = export_rows(stack.api_url, run_id, token)
    assert len(rows) == len(expected)
    assert_export_exact(rows, expected)
    # The raw level of the metrics query gives the same values, in step order.
    raw = raw_metric(stack.api_url, run_id, "m0", 0, STEPS - 1, token)
    assert [s for s, _ in raw] == list(range(STEPS))
    for step, value in raw:
        assert same(value, expected[("m0", step)]), (step, value)
    assert math.isnan(dict(raw)[7]) and dict(raw)[11] == math.inf and dict(raw)[13] == -math.inf


def test_sdk_over_http_round_trip(stack):
    stack.start_worker()
    stack.start_api()
    token = stack.token("pipeline")
    driver = Driver(stack, server=stack.api_url, token=token, project="pipeline",
                    steps=STEPS, metrics=METRICS, extra=["--special"])
    driver.wait()
    assert_round_trip(stack, driver.run_id, token)
    summary = get_run(stack.api_url, driver.run_id, token).json()
    assert summary["status"] == "finished"
    assert summary["last_step"] == STEPS - 1
    assert summary["project"] == "pipeline"


def test_wire_batches_over_http_and_a_legacy_broker_message(stack):
    """The same batches without the SDK: POST /ingest, and a task of the first contract (the
    events in the message, as the previous release's redis:// transport sent them) still
    in the broker during an upgrade: the worker puts it into the inbox and stores it."""
    stack.start_worker()
    stack.start_api()
    token = stack.token("wire")
    via_http, via_task = WireRun("wire", "http"), WireRun("wire", "task")
    client = celery_client(stack.redis_url)
    for run in (via_http, via_task):
        batches = [[run.started()]]
        for lo in range(0, STEPS, 100):
            batch = []
            for step in range(lo, lo + 100):
                values = {f"m{k}": value_at(step, k) for k in range(METRICS)}
                if step in SPECIAL:
                    values["m0"] = SPECIAL[step]
                batch.append(run.metrics(step, values))
            batches.append(batch)
        batches[-1].append(run.finished(STEPS - 1))
        for batch in batches:
            if run is via_http:
                r = post_batch(stack.api_url, token, batch)
                assert r.status_code == 202, r.text
                assert r.json() == {"accepted": len(batch)}
            else:
                send_batch_task(client, batch, token)
    for run in (via_http, via_task):
        assert_round_trip(stack, run.run, token)


@pytest.mark.parametrize("status, body", [(401, None), (404, "unknown-run")])
def test_rejected_http_batch_writes_nothing(stack, status, body):
    stack.start_api()
    token = stack.token("reject")
    run = WireRun("reject")
    if status == 401:
        r = post_batch(stack.api_url, "rc_not-a-token", [run.started(), run.metrics(0, {"a": 1.0})])
    else:
        r = post_batch(stack.api_url, token, [run.metrics(0, {"a": 1.0})])
    assert r.status_code == status, r.text
    assert "error" in r.json()
    from integration.helpers import point_count

    assert point_count(stack.engine, run.run) == 0
