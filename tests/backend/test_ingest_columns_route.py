"""POST /api/v1/ingest with a columnar body (``metrics_columns``): stored, counted by its rows, and
every hostile body refused with 422 naming the field, nothing written."""

from __future__ import annotations

import json
from typing import Any

import pytest
from runcast.wire.events import MAX_BATCH_EVENTS, MAX_METRICS_PER_EVENT
from runcast_server.core.auth import create_token

from backend.helpers import counts, started

URL = "/api/v1/ingest"


@pytest.fixture
def token(db: Any, embedded: Any) -> str:
    with db.scope() as session:
        return create_token(session, "demo")


def post(client: Any, events: list[Any], token: str) -> Any:
    return client.post(URL, content=json.dumps({"v": 1, "events": events}).encode(),
                       headers={"Content-Type": "application/json", "Authorization": f"Bearer {token}"})


def columns(n: int = 4, **fields: Any) -> dict[str, Any]:
    event = {"v": 1, "type": "metrics_columns", "run": "run_aaaaaaaa", "segment": "seg_aaaaaaaa", "seq": 1,
             "ts": 100.0, "steps": list(range(n)), "times": [100.0 + i for i in range(n)],
             "values": {"loss": [1.0 / (i + 1) for i in range(n)], "lr": ["NaN", None, 0.5, 2][:n] + [0.1] * (n - 4)}}
    event.update(fields)
    return event


def test_a_columnar_batch_is_stored_and_counted_by_its_rows(db: Any, embedded: Any, token: str) -> None:
    r = post(embedded, [started(), columns()], token)
    assert r.status_code == 202 and r.json() == {"accepted": 5}
    assert counts(db.engine)["points"] == 7  # 4 of loss, 3 of lr (a null is a step without lr)
    run = embedded.get("/api/v1/runs/run_aaaaaaaa").json()
    assert run["last_step"] == 3
    me = embedded.get("/api/v1/whoami", headers={"Authorization": f"Bearer {token}"}).json()
    assert "metrics_columns" in me["event_types"]


HOSTILE = [
    pytest.param({"steps": [0, 1, 2]}, "times", id="ragged-times"),
    pytest.param({"values": {"loss": [1.0, 2.0]}}, "values.loss", id="ragged-column"),
    pytest.param({"steps": [0, 1.5, 2, 3]}, "steps.1", id="float-step"),
    pytest.param({"steps": [0, True, 2, 3]}, "steps.1", id="bool-step"),
    pytest.param({"steps": [0, -1, 2, 3]}, "steps.1", id="negative-step"),
    pytest.param({"steps": [0, 1, 2, 2**53]}, "steps.3", id="step-too-large"),
    pytest.param({"steps": "0123"}, "steps", id="steps-not-a-list"),
    pytest.param({"steps": []}, "steps", id="no-rows"),
    pytest.param({"times": [1.0, "x", 2.0, 3.0]}, "times.1", id="time-not-a-number"),
    pytest.param({"times": [1.0, 2.0, -3.0, 4.0]}, "times.2", id="negative-time"),
    pytest.param({"values": {"loss": [1.0, "one", 2.0, 3.0]}}, "values.loss.1", id="value-not-a-number"),
    pytest.param({"values": {"loss": [1.0, True, 2.0, 3.0]}}, "values.loss.1", id="bool-value"),
    pytest.param({"values": {"loss": [1.0, [2.0], 2.0, 3.0]}}, "values.loss.1", id="nested-value"),
    pytest.param({"values": {"loss": [1.0, 10**400, 2.0, 3.0]}}, "values.loss.1", id="huge-int"),
    pytest.param({"values": {"loss": [1.0, None, 2.0, 3.0]}}, "steps.1", id="empty-row"),
    pytest.param({"values": {}}, "values", id="no-keys"),
    pytest.param({"values": {"loss": [1.0] * 4, "lr": [None] * 4}}, "values.lr", id="empty-column"),
    pytest.param({"values": {"_timestamp": [1.0] * 4}}, "values._timestamp", id="reserved-key"),
    pytest.param({"values": {"system/n0/rank0/cpu": [1.0] * 4}}, "values.system/n0/rank0/cpu", id="system-key"),
    pytest.param({"values": {"a\x01": [1.0] * 4}}, "values.'a\\x01'", id="control-key"),
    pytest.param({"values": {f"k{i}": [1.0] * 4 for i in range(MAX_METRICS_PER_EVENT + 1)}}, "values", id="too-many-keys"),
    pytest.param({"run": "bad id"}, "run", id="bad-run"),
]


@pytest.mark.parametrize(("fields", "field"), HOSTILE)
def test_a_hostile_columnar_body_is_422_naming_the_field_and_writes_nothing(
        db: Any, embedded: Any, token: str, fields: dict[str, Any], field: str) -> None:
    before = counts(db.engine)
    r = post(embedded, [started(), columns(**fields)], token)
    assert r.status_code == 422, r.text
    error = r.json()["error"]
    assert (error["field"], error["index"]) == (field, 1), error
    assert counts(db.engine) == before


def test_rows_count_against_the_batch_limit(db: Any, embedded: Any, token: str) -> None:
    """A columnar event cannot carry more than a batch of events may: its rows count as events."""
    n = MAX_BATCH_EVENTS
    big = columns(n, values={"loss": [0.5] * n})
    r = post(embedded, [started(), big], token)  # 1 + MAX_BATCH_EVENTS events
    assert r.status_code == 422 and r.json()["error"]["field"] == "events"
    assert r.json()["error"].get("index") is None  # the SDK halves such a batch
    assert counts(db.engine)["runs"] == 0
    two = [columns(n // 2, values={"loss": [0.5] * (n // 2)}), columns(n // 2, values={"loss": [0.5] * (n // 2)})]
    r = post(embedded, [started(), *two], token)
    assert r.status_code == 422 and r.json()["error"]["field"] == "events"
    r = post(embedded, [started(), columns(n - 1, values={"loss": [0.5] * (n - 1)})], token)
    assert r.status_code == 202 and r.json() == {"accepted": n}


def test_a_resent_columnar_batch_adds_nothing(db: Any, embedded: Any, token: str) -> None:
    assert post(embedded, [started(), columns()], token).status_code == 202
    before = counts(db.engine)
    assert post(embedded, [columns()], token).status_code == 202
    assert counts(db.engine) == before


def test_another_projects_run_takes_no_column(db: Any, embedded: Any, token: str) -> None:
    """Columns for a run of another project answer as for an unknown run (404 naming ``run``), writing nothing;
    the run's own project still stores them."""
    with db.scope() as session:
        other = create_token(session, "other")
    assert post(embedded, [started(run="run_other001", project="other")], other).status_code == 202
    before = counts(db.engine)
    r = post(embedded, [columns(run="run_other001")], token)
    assert r.status_code == 404, r.text
    assert r.json()["error"] == {"message": "unknown run 'run_other001': send its run_started first",
                                 "field": "run", "index": 0}
    # Beside a run of its own project in one batch: the whole batch is refused, nothing half-written.
    r = post(embedded, [started(), columns(), columns(run="run_other001", seq=2)], token)
    assert r.status_code == 404 and r.json()["error"]["index"] == 2, r.text
    assert counts(db.engine) == before
    assert post(embedded, [columns(run="run_other001")], other).status_code == 202
    assert counts(db.engine)["points"] == before["points"] + 7
