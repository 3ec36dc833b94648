"""The ingest inbox on SQLite and PostgreSQL (tasks run in-process): accepted batches end
done, poison is quarantined with its valid siblings stored, detectors run after the
commit and may fail without costing data, redelivery changes nothing, the sweeper stores
what was left behind, and the admin routes show and retry quarantined batches."""

from __future__ import annotations

import json
import time
from typing import Any

import pytest
from alerts.helpers import WireRun, loss_curve
from runcast.wire.events import dumps_batch
from runcast.wire.limits import TIMESTAMP_KEY
from runcast_server.core.auth import create_admin_token, create_token
from runcast_server.inbox import accept as inbox_accept
from runcast_server.inbox import process as inbox_process
from runcast_server.inbox.models import InboxRow
from runcast_server.inbox.sweep import sweep
from runcast_server.tasks import enqueue_ingest
from sqlalchemy import text, update

from backend.helpers import counts

URL = "/api/v1/ingest"


@pytest.fixture
def token(db: Any, client: Any) -> str:
    with db.scope() as session:
        return create_token(session, "demo")


@pytest.fixture
def admin(db: Any, client: Any) -> dict[str, str]:
    with db.scope() as session:
        return {"Authorization": f"Bearer {create_admin_token(session, 'tests')}"}


def post(client: Any, token: str, events: list[dict[str, Any]]) -> Any:
    return client.post(URL, content=dumps_batch(events), headers={"Authorization": f"Bearer {token}"})


def rows(db: Any) -> list[InboxRow]:
    with db.scope() as session:
        return list(session.query(InboxRow).order_by(InboxRow.id))


def add_row(db: Any, body: bytes, events: int, project: str = "demo") -> int:
    """An inbox row as the API commits it, without enqueueing it."""
    from runcast_server.core.auth import get_or_create_project

    now = time.time()
    with db.scope() as session:
        pid = get_or_create_project(session, project).id
        return inbox_accept.add(session, pid, body, events, now, next_sweep_at=now + 30)


def test_accepted_batch_ends_done_with_its_body_cleared(db: Any, settings: Any, client: Any, token: str) -> None:
    run = WireRun()
    r = post(client, token, [run.started(), *(run.metrics(s, loss=1.0 / (s + 1)) for s in range(10))])
    assert r.status_code == 202, r.text
    [row] = rows(db)
    assert (row.state, row.events, row.body, row.error, row.detector_error) == ("done", 11, None, None, None)
    assert row.next_sweep_at == pytest.approx(row.done_at + settings.inbox_retention_s)
    assert counts(db.engine)["points"] == 10


def test_embedded_api_stores_the_events_it_validated_without_decoding_the_body_again(db: Any,
        client: Any, token: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """Embedded, the request's own validated events are stored (and fed to the detectors):
    the committed body is not read back; the same batch from the row changes nothing."""
    run = WireRun()
    curve = loss_curve(400, seed=7, spike=(300, 5, 2.0))
    events = [run.started(), *(run.metrics(s, loss=curve[s], lr=1e-3) for s in range(400))]

    def refuse(body: bytes) -> Any:
        raise AssertionError("the body was decoded again")

    with monkeypatch.context() as m:
        m.setattr(inbox_process, "decode", refuse)
        assert post(client, token, events).status_code == 202
    [row] = rows(db)
    assert (row.state, row.body, row.detector_error) == ("done", None, None)
    after = _detector_tables(db)
    assert after["points"] == 800
    assert [(a[1], a[3]) for a in after["alerts"]] == [("spike", 300)]
    with db.scope() as session:  # the row again, as a redelivery reads it
        session.execute(update(InboxRow).where(InboxRow.id == row.id).values(state="pending", body=dumps_batch(events)))
    enqueue_ingest(client.app.state.context, row.id)
    assert _detector_tables(db) == after
    assert [r.state for r in rows(db)] == ["done"]


def test_poison_event_is_quarantined_and_its_siblings_stored(db: Any, client: Any, token: str, admin: dict[str, str]) -> None:
    """A metric name with a lone surrogate among valid events (a row accepted before the API
    refused such names): the valid events are stored, the bad one is listed, nothing crashes."""
    run = WireRun()
    events = [run.started(), *(run.metrics(s, loss=float(s)) for s in range(100)), run.metrics(100, ok=1.0)]
    events[50]["values"] = {"\ud800": 1.0}
    body = json.dumps({"v": 1, "events": events}, ensure_ascii=True).encode()
    inbox_id = add_row(db, body, len(events))
    enqueue_ingest(client.app.state.context, inbox_id)
    [row] = rows(db)
    assert row.state == "quarantined" and row.body == body
    assert [b["index"] for b in row.bad_events] == [50]
    got = client.get(f"/api/v1/runs/{run.run}/export", params={"format": "jsonl"}).text.splitlines()
    assert len(got) == 100  # 99 valid loss points + ok at step 100
    assert {json.loads(line)["step"] for line in got} == set(range(101)) - {49}  # event 50 is step 49

    # The admin routes: only an admin token opens them.
    assert client.get("/api/v1/admin/inbox").status_code == 401
    assert client.get("/api/v1/admin/inbox", headers={"Authorization": f"Bearer {token}"}).status_code == 403
    assert client.get("/api/v1/admin/inbox", headers={"Authorization": "Bearer rca_nope"}).status_code == 401
    listed = client.get("/api/v1/admin/inbox", headers=admin).json()
    assert [(r["id"], r["state"], r["project"], r["events"]) for r in listed["rows"]] == [
        (inbox_id, "quarantined", "demo", 102)
    ]
    shown = client.get(f"/api/v1/admin/inbox/{inbox_id}", headers=admin).json()
    assert shown["bad_events"][0]["index"] == 50 and "\\ud800" in shown["bad_events"][0]["event"]
    assert client.get("/api/v1/admin/inbox/stats", headers=admin).json()["states"]["quarantined"] == 1
    assert client.get("/api/v1/admin/inbox/999999", headers=admin).status_code == 404
    # A retry runs it again: still poison, so quarantined again; nothing stored twice.
    r = client.post(f"/api/v1/admin/inbox/{inbox_id}/retry", headers=admin)
    assert r.status_code == 202, r.text
    [row] = rows(db)
    assert row.state == "quarantined" and [b["index"] for b in row.bad_events] == [50]
    assert len(client.get(f"/api/v1/runs/{run.run}/export", params={"format": "jsonl"}).text.splitlines()) == 100
    assert client.post(f"/api/v1/admin/inbox/{inbox_id}/retry").status_code == 401


def test_unreadable_body_is_quarantined_whole(db: Any, client: Any, token: str) -> None:
    inbox_id = add_row(db, b'{"v": 1, "events": [', 1)
    enqueue_ingest(client.app.state.context, inbox_id)
    [row] = rows(db)
    assert row.state == "quarantined" and row.bad_events[0]["index"] is None


def test_a_raising_detector_costs_no_data(db: Any, client: Any, token: str, monkeypatch: pytest.MonkeyPatch,
                                          admin: dict[str, str]) -> None:
    from runcast_server.alerts import engine

    def broken(*args: Any, **kwargs: Any) -> None:
        raise RuntimeError("a detector bug")

    run = WireRun()
    curve = loss_curve(400, seed=5, spike=(300, 5, 2.0))
    assert post(client, token, [run.started()]).status_code == 202
    monkeypatch.setattr(engine, "run_detectors", broken)
    r = post(client, token, [run.metrics(s, loss=curve[s]) for s in range(200)])
    assert r.status_code == 202, r.text
    assert counts(db.engine)["points"] == 200
    failed = [row for row in rows(db) if row.detector_error]
    assert len(failed) == 1 and "a detector bug" in failed[0].detector_error and failed[0].state == "done"
    assert client.get("/api/v1/admin/inbox/stats", headers=admin).json()["detector_errors"] == 1
    # With the detectors back, the next batches open the spike alert as usual.
    monkeypatch.undo()
    assert post(client, token, [run.metrics(s, loss=curve[s]) for s in range(200, 400)]).status_code == 202
    alerts = client.get(f"/api/v1/runs/{run.run}/alerts").json()["alerts"]
    assert [(a["kind"], a["step"]) for a in alerts] == [("spike", 300)]
    assert counts(db.engine)["points"] == 400


def _detector_tables(db: Any) -> dict[str, Any]:
    with db.engine.connect() as conn:
        return {
            "states": sorted(map(tuple, conn.execute(text("SELECT run_id, segment_id, key, detector, state FROM detector_states")))),
            "alerts": sorted(map(tuple, conn.execute(text("SELECT id, kind, state, step, end_step FROM alerts")))),
            "versions": sorted(map(tuple, conn.execute(text("SELECT id, version FROM runs")))),
            "points": conn.execute(text("SELECT count(*) FROM points WHERE series_id IN"
                                        " (SELECT id FROM series WHERE key <> :t)"), {"t": TIMESTAMP_KEY}).scalar_one(),
            "events": conn.execute(text("SELECT count(*) FROM events")).scalar_one(),
        }


def test_redelivered_batch_and_detector_pass_change_nothing(db: Any, client: Any, token: str) -> None:
    run = WireRun()
    curve = loss_curve(400, seed=7, spike=(300, 5, 2.0))
    assert post(client, token, [run.started()]).status_code == 202
    bodies = []
    for lo in range(0, 400, 100):
        bodies.append(dumps_batch([run.metrics(s, loss=curve[s]) for s in range(lo, lo + 100)]))
        enqueue_ingest(client.app.state.context, add_row(db, bodies[-1], 100))
    before = _detector_tables(db)
    assert [(a[1], a[3]) for a in before["alerts"]] == [("spike", 300)]
    ids = [row.id for row in rows(db)][1:]
    for inbox_id, body in zip(ids, bodies, strict=True):
        for state in ("stored", "pending"):  # the detector pass alone, then the whole batch again
            with db.scope() as session:
                session.execute(update(InboxRow).where(InboxRow.id == inbox_id).values(state=state, body=body))
            assert enqueue_ingest(client.app.state.context, inbox_id) is None
            assert _detector_tables(db) == before
    assert all(row.state == "done" for row in rows(db))


def test_sweeper_stores_rows_left_behind_and_prunes_old_ones(settings: Any, db: Any, client: Any, token: str) -> None:
    run = WireRun()
    assert post(client, token, [run.started()]).status_code == 202
    inbox_id = add_row(db, dumps_batch([run.metrics(s, loss=1.0) for s in range(5)]), 5)  # never enqueued
    now = time.time()
    ctx = client.app.state.context

    def store(inbox_id: int) -> None:
        enqueue_ingest(ctx, inbox_id)

    assert sweep(db, now, settings, store).enqueued == 0  # not due yet
    assert sweep(db, now + 31, settings, store).as_dict() == {"enqueued": 1, "pruned": 0, "failed": 0}
    assert counts(db.engine)["points"] == 5
    assert {row.id: row.state for row in rows(db)}[inbox_id] == "done"
    result = sweep(db, now + settings.inbox_retention_s + 60, settings, store)
    assert (result.enqueued, result.pruned) == (0, 2)
    assert rows(db) == []


def test_sweeper_backs_off_on_a_row_it_cannot_enqueue(settings: Any, db: Any, client: Any, token: str) -> None:
    inbox_id = add_row(db, b"{}", 1)
    now = time.time()

    def broker_down(_: int) -> None:
        raise ConnectionError("broker down")

    assert sweep(db, now + 31, settings, broker_down).failed == 1
    assert sweep(db, now + 32, settings, broker_down).failed == 0  # not due again before 2 x 30 s
    assert sweep(db, now + 31 + 61, settings, broker_down).failed == 1
    [row] = rows(db)
    assert (row.id, row.state, row.sweeps) == (inbox_id, "pending", 2)


def test_deeply_nested_config_neither_crashes_nor_blocks(db: Any, client: Any, token: str) -> None:
    """A run_started with a config nested 600 levels (as a row accepted under older rules)."""
    run, other = WireRun(name="deep"), WireRun(name="other")
    config: dict[str, Any] = {}
    for _ in range(600):
        config = {"a": config}
    deep = json.dumps({"v": 1, "events": [run.started(config=config), run.metrics(0, loss=1.0)]}).encode()
    enqueue_ingest(client.app.state.context, add_row(db, deep, 2))
    assert rows(db)[0].state in ("done", "quarantined")
    assert post(client, token, [other.started(), other.metrics(0, loss=2.0)]).status_code == 202
    assert client.get(f"/api/v1/runs/{other.run}/export", params={"format": "jsonl"}).text.count("\n") == 1


def test_database_down_is_503_json_with_retry_after(client: Any, token: str, monkeypatch: pytest.MonkeyPatch) -> None:
    from dataclasses import replace

    from runcast_server.core.db import Database
    from services import free_port

    down = Database.open(f"postgresql+psycopg://postgres@127.0.0.1:{free_port()}/x")  # nothing listens there
    monkeypatch.setattr(client.app.state, "context", replace(client.app.state.context, database=down))
    r = post(client, token, [WireRun().started()])
    assert r.status_code == 503
    assert r.headers["Retry-After"] == "5"
    assert "database" in r.json()["error"]["message"]
