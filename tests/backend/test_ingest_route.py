"""POST /api/v1/ingest in the embedded default: accepted batches land, rejected ones write nothing."""

from __future__ import annotations

import json
from typing import Any

import pytest
from runcast.wire.events import MAX_BATCH_EVENTS
from runcast_server.core.auth import create_token

from backend.helpers import counts, metrics, started, wire

URL = "/api/v1/ingest"


@pytest.fixture
def token(db: Any, embedded: Any) -> str:
    with db.scope() as session:
        return create_token(session, "demo")


def post(client: Any, events: list[dict[str, Any]] | None = None, token: str | None = None, body: bytes | None = None) -> Any:
    headers = {"Content-Type": "application/json"}
    if token is not None:
        headers["Authorization"] = f"Bearer {token}"
    if body is None:
        body = json.dumps({"v": 1, "events": events}).encode()
    return client.post(URL, content=body, headers=headers)


def test_happy_path_stores_points_and_state(db: Any, embedded: Any, token: str) -> None:
    events = [started(), *(metrics(s, {"loss": 2.0 - s / 10, "lr": "NaN"}) for s in range(5))]
    r = post(embedded, events, token)
    assert r.status_code == 202 and r.json() == {"accepted": 6}
    c = counts(db.engine)
    assert (c["runs"], c["segments"], c["series"], c["points"], c["events"]) == (1, 1, 2, 10, 1)
    run = embedded.get("/api/v1/runs/run_aaaaaaaa").json()
    assert run["last_step"] == 4 and run["status"] == "running"
    # The next batch (no run_started) is accepted: the run was registered.
    r = post(embedded, [metrics(5, {"loss": 1.0}), wire("finished", status="finished", step=5)], token)
    assert r.status_code == 202
    assert embedded.get("/api/v1/runs/run_aaaaaaaa").json()["status"] == "finished"
    assert counts(db.engine)["points"] == 11


def test_resent_batch_changes_nothing(db: Any, embedded: Any, token: str) -> None:
    events = [started(), metrics(1, {"loss": 1.0}), metrics(2, {"loss": 0.5})]
    assert post(embedded, events, token).status_code == 202
    before = counts(db.engine)
    assert post(embedded, events, token).status_code == 202
    assert counts(db.engine) == before


BAD_EVENTS = [
    # (second event of the batch, expected status, field prefix)
    pytest.param({"type": "metrics", "run": "run_aaaaaaaa", "segment": "seg_aaaaaaaa", "ts": 1.0, "step": 1, "values": {"a": 1}}, 422, "seq", id="missing-seq"),
    pytest.param(metrics(1, {"a": 1}, type="bogus"), 422, "type", id="unknown-type"),
    pytest.param(metrics(-1, {"a": 1}), 422, "step", id="negative-step"),
    pytest.param(metrics(1.5, {"a": 1}), 422, "step", id="float-step"),
    pytest.param(metrics("7", {"a": 1}), 422, "step", id="string-step"),
    pytest.param(metrics(1, {"bad\x07name": 1}), 422, "values", id="control-char-key"),
    pytest.param(metrics(1, {"k" * 201: 1}), 422, "values", id="key-over-200-bytes"),
    pytest.param(metrics(1, {"é" * 101: 1}), 422, "values", id="key-over-200-utf8-bytes"),
    pytest.param(metrics(1, {"a": "lots"}), 422, "values.a", id="value-not-number"),
    pytest.param(metrics(1, {}), 422, "values", id="no-values"),
    pytest.param(metrics(1, {"a": 1}, run="x"), 422, "run", id="bad-run-id"),
    pytest.param(metrics(1, {"a": 1}, run="run_unknown1"), 404, "run", id="unknown-run"),
    pytest.param(metrics(1, {"a": 1}, segment="seg_unknown1"), 404, "segment", id="unknown-segment"),
    pytest.param(started(run="run_bbbbbbbb", project="other"), 403, "project", id="run-started-other-project"),
]


@pytest.mark.parametrize(("bad", "status", "field"), BAD_EVENTS)
def test_bad_event_rejects_whole_batch(db: Any, embedded: Any, token: str, bad: dict[str, Any], status: int, field: str) -> None:
    # The batch opens a new run: a rejected batch must not register it either.
    before = counts(db.engine)
    r = post(embedded, [started(), bad, metrics(2, {"a": 1})], token)
    assert r.status_code == status, r.text
    error = r.json()["error"]
    assert error["index"] == 1
    assert error["field"].startswith(field)
    assert error["message"]
    assert counts(db.engine) == before


@pytest.mark.parametrize("project", ["absent", None])
def test_a_run_started_naming_no_project_goes_to_the_tokens(db: Any, embedded: Any, token: str,
                                                            project: str | None) -> None:
    # What init() sends when the server was away at start (or the run was offline): no project.
    first = started()
    if project == "absent":
        del first["project"]
    else:
        first["project"] = None
    assert post(embedded, [first, metrics(1, {"a": 1})], token).status_code == 202
    assert embedded.get("/api/v1/runs/run_aaaaaaaa").json()["project"] == "demo"
    bad = started(run="run_bbbbbbbb", project="")
    r = post(embedded, [bad], token)
    assert r.status_code == 422 and r.json()["error"]["field"] == "project"


def test_run_of_another_project_answers_as_an_unknown_run(db: Any, embedded: Any, token: str) -> None:
    with db.scope() as session:
        other = create_token(session, "other")
    assert post(embedded, [started(run="run_other001", project="other")], other).status_code == 202
    before = counts(db.engine)
    r = post(embedded, [metrics(1, {"a": 1}, run="run_other001")], token)
    unknown = post(embedded, [metrics(1, {"a": 1}, run="run_nobody01")], token)
    assert r.status_code == unknown.status_code == 404
    assert r.json() == {"error": {"message": "unknown run 'run_other001': send its run_started first",
                                  "field": "run", "index": 0}}
    assert unknown.json()["error"]["message"] == "unknown run 'run_nobody01': send its run_started first"
    # A run_started for the other project's id cannot be stored: 409, the one answer that differs.
    r = post(embedded, [started(run="run_other001")], token)
    assert r.status_code == 409 and r.json()["error"]["field"] == "run"
    assert counts(db.engine) == before


@pytest.mark.parametrize("header", [None, "Bearer rc_not_a_token", "Basic abc", "Bearer "])
def test_missing_or_wrong_token_is_401(db: Any, embedded: Any, token: str, header: str | None) -> None:
    before = counts(db.engine)
    headers = {"Authorization": header} if header is not None else {}
    r = embedded.post(URL, content=json.dumps({"v": 1, "events": [started()]}), headers=headers)
    assert r.status_code == 401
    assert r.json()["error"]["field"] == "Authorization"
    assert counts(db.engine) == before


@pytest.mark.parametrize(
    "body",
    [b"{not json", b"", b'{"v": 1, "events": [NaN]}', b"\xff\xfe", b'{"v": 1, "events": [1,]}'],
    ids=["garbage", "empty", "nan-literal", "not-utf8", "trailing-comma"],
)
def test_not_json_is_400(db: Any, embedded: Any, token: str, body: bytes) -> None:
    before = counts(db.engine)
    r = post(embedded, token=token, body=body)
    assert r.status_code == 400
    assert r.json()["error"]["field"] == "body"
    assert counts(db.engine) == before


@pytest.mark.parametrize(
    ("body", "field"),
    [({"v": 1}, "events"), ({"v": 1, "events": []}, "events"), ([1, 2], "body"), ({"v": 2, "events": [started()]}, "v")],
)
def test_batch_shape_is_422(embedded: Any, token: str, body: Any, field: str) -> None:
    r = post(embedded, token=token, body=json.dumps(body).encode())
    assert r.status_code == 422
    assert r.json()["error"]["field"] == field


def test_too_many_events_is_422(db: Any, embedded: Any, token: str) -> None:
    r = post(embedded, [started(), *(metrics(s, {"a": 1}) for s in range(MAX_BATCH_EVENTS))], token)
    assert r.status_code == 422 and r.json()["error"]["field"] == "events"
    assert f"more than {MAX_BATCH_EVENTS}" in r.json()["error"]["message"]
    assert counts(db.engine)["runs"] == 0


def test_the_largest_batch_is_stored_whole_and_whoami_names_its_size(db: Any, embedded: Any, token: str) -> None:
    """A batch of MAX_BATCH_EVENTS (20,000; earlier servers took 5000, and 1000 before they said so) is
    stored in full, and whoami tells an SDK so (it sends at most 1000 to a server that does not say)."""
    assert embedded.get("/api/v1/whoami", headers={"Authorization": f"Bearer {token}"}).json()["max_batch_events"] \
        == MAX_BATCH_EVENTS == 20_000
    r = post(embedded, [started(), *(metrics(s, {"a": s / 7}) for s in range(MAX_BATCH_EVENTS - 1))], token)
    assert r.status_code == 202 and r.json() == {"accepted": MAX_BATCH_EVENTS}
    assert counts(db.engine)["points"] == MAX_BATCH_EVENTS - 1


def test_body_over_limit_is_413(db: Any, settings: Any, embedded: Any, token: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(settings, "max_body_bytes", 2000)
    before = counts(db.engine)
    events = [started(), *(metrics(s, {"loss": 1.0}) for s in range(40))]
    r = post(embedded, events, token)
    assert r.status_code == 413
    assert r.json()["error"]["field"] == "body"
    # Also without a Content-Length header (chunked upload).
    r = embedded.post(URL, content=iter([json.dumps({"v": 1, "events": events}).encode()]), headers={"Authorization": f"Bearer {token}"})
    assert r.status_code == 413
    assert counts(db.engine) == before


def test_broker_down_still_accepts_durably(db: Any, embedded: Any, token: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """The inbox holds the batch: 202 without a broker; the sweeper enqueues it later."""
    from fastapi.testclient import TestClient
    from runcast_server.app import create_app
    from runcast_server.core.settings import Settings
    from runcast_server.inbox.models import InboxRow

    monkeypatch.setenv("RUNCAST_REDIS_URL", "redis://127.0.0.1:9/0")  # nothing listens on port 9
    with TestClient(create_app(Settings())) as production:  # the same database, a broker that is down
        r = post(production, [started(), metrics(1, {"a": 1})], token)
    assert r.status_code == 202, r.text
    assert counts(db.engine)["points"] == 0
    with db.scope() as session:
        assert [(row.state, row.events) for row in session.query(InboxRow)] == [("pending", 2)]
