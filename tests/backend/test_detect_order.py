"""The detectors take a run's batches in the order the API accepted them, whichever worker
stored or detected which first (``inbox.process``): a run whose batches were taken out of
order ends with the alerts of the same batches taken in order. On SQLite and PostgreSQL."""

from __future__ import annotations

import json
from typing import Any

import pytest
from alerts.helpers import WireRun, loss_curve
from runcast.wire.events import dumps_batch
from runcast_server.api.routes import ingest as ingest_route
from runcast_server.core.auth import create_token
from runcast_server.inbox import process as inbox_process
from runcast_server.inbox.models import InboxRow
from runcast_server.tasks import store_row
from sqlalchemy import update

BATCH, BATCHES = 100, 4
SPIKES = (50, 250)  # in the batches that the orders below take second


@pytest.fixture
def token(db: Any, client: Any) -> str:
    with db.scope() as session:
        return create_token(session, "demo")


def curve() -> list[float]:
    values = loss_curve(BATCH * BATCHES, seed=11)
    for start in SPIKES:
        for s in range(start, start + 5):
            values[s] *= 3.0
    return values


def batches(run: WireRun) -> list[list[dict[str, Any]]]:
    values = curve()
    return [[run.metrics(s, loss=values[s]) for s in range(lo, lo + BATCH)] for lo in range(0, BATCH * BATCHES, BATCH)]


def post(client: Any, token: str, events: list[dict[str, Any]]) -> None:
    r = client.post("/api/v1/ingest", content=dumps_batch(events), headers={"Authorization": f"Bearer {token}"})
    assert r.status_code == 202, r.text


def held(client: Any, token: str, monkeypatch: pytest.MonkeyPatch, bodies: list[list[dict[str, Any]]]) -> list[int]:
    """Each batch accepted by the API (committed to the inbox) and not processed: its inbox id."""
    ids: list[int] = []
    with monkeypatch.context() as m:
        m.setattr(ingest_route, "enqueue_ingest", lambda ctx, inbox_id, events=None: ids.append(inbox_id))
        for events in bodies:
            post(client, token, events)
    return ids


def alerts(client: Any, run: WireRun) -> list[tuple[Any, ...]]:
    got = client.get(f"/api/v1/runs/{run.run}/alerts").json()["alerts"]
    return sorted((a["kind"], a["step"], a["state"], a.get("end_step")) for a in got)


def states(db: Any, ids: list[int]) -> list[str]:
    with db.scope() as session:
        return [session.get(InboxRow, i).state for i in ids]


def reference(client: Any, token: str) -> list[tuple[Any, ...]]:
    """The alerts of the batches taken in order, one after the other."""
    run = WireRun(name="in-order")
    post(client, token, [run.started()])
    for events in batches(run):
        post(client, token, events)
    got = alerts(client, run)
    assert [(kind, step) for kind, step, *_ in got] == [("spike", s) for s in SPIKES]
    return got


def test_batches_stored_and_detected_out_of_order_alert_as_in_order(client: Any, db: Any, token: str,
                                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    """A worker that takes batch 2 whole before another takes batch 1: batch 2 waits, stored, and
    the worker of batch 1 detects both, in order."""
    expected = reference(client, token)
    run = WireRun(name="out-of-order")
    post(client, token, [run.started()])
    ids = held(client, token, monkeypatch, batches(run))
    ctx = client.app.state.context
    store_row(ctx, ids[1])
    assert states(db, ids) == ["pending", "stored", "pending", "pending"]  # behind a batch not stored yet
    store_row(ctx, ids[0])
    assert states(db, ids) == ["done", "done", "pending", "pending"]
    store_row(ctx, ids[3])
    store_row(ctx, ids[2])
    assert states(db, ids) == ["done"] * BATCHES
    assert alerts(client, run) == expected


def test_batches_stored_in_order_and_detected_backwards_alert_as_in_order(client: Any, db: Any, token: str,
                                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    """Every batch stored, then their detector passes run last first (the workers' second
    transactions in the other order): the first pass takes the run's rows in order."""
    expected = reference(client, token)
    run = WireRun(name="backwards")
    post(client, token, [run.started()])
    ids = held(client, token, monkeypatch, batches(run))
    ctx = client.app.state.context
    with monkeypatch.context() as m:
        m.setattr(inbox_process, "_detect", lambda *args, **kwargs: False)
        for inbox_id in ids:
            store_row(ctx, inbox_id)
    assert states(db, ids) == ["stored"] * BATCHES
    store_row(ctx, ids[-1])  # a redelivery of the last one: its detector pass
    assert states(db, ids) == ["done"] * BATCHES
    for inbox_id in reversed(ids[:-1]):
        store_row(ctx, inbox_id)  # nothing left to do
    assert alerts(client, run) == expected


def test_a_batch_of_another_run_holds_nothing_back(client: Any, db: Any, token: str,
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    other = WireRun(name="other")
    post(client, token, [other.started()])
    [waiting] = held(client, token, monkeypatch, [[other.metrics(0, loss=1.0)]])
    expected = reference(client, token)  # posted after the other run's batch, processed at once
    assert expected and states(db, [waiting]) == ["pending"]


def test_the_batches_behind_a_quarantined_one_are_detected(client: Any, db: Any, token: str,
                                                           monkeypatch: pytest.MonkeyPatch) -> None:
    """Batch 1 turns out to be poison (a row accepted before the API refused what it holds): the
    batches stored behind it, waiting for it, are detected once it is quarantined."""
    run = WireRun(name="poison")
    post(client, token, [run.started()])
    bodies = batches(run)
    ids = held(client, token, monkeypatch, bodies)
    poison = [dict(e) for e in bodies[1]]
    poison[10] = {**poison[10], "values": {"\ud800": 1.0}}
    with db.scope() as session:
        body = json.dumps({"v": 1, "events": poison}, ensure_ascii=True).encode()
        session.execute(update(InboxRow).where(InboxRow.id == ids[1]).values(body=body))
    ctx = client.app.state.context
    store_row(ctx, ids[0])
    store_row(ctx, ids[2])
    store_row(ctx, ids[3])
    assert states(db, ids) == ["done", "pending", "stored", "stored"]
    store_row(ctx, ids[1])
    assert states(db, ids) == ["done", "quarantined", "done", "done"]
    assert [(kind, step) for kind, step, *_ in alerts(client, run)] == [("spike", s) for s in SPIKES]
