"""The ingest task, run eagerly: the contract-2 message (an inbox id), messages of the first
contract still in a broker during an upgrade, refused unknown contracts, and unreadable
messages (quarantined, as are the ones the worker refused before decoding them)."""

from __future__ import annotations

from typing import Any

import pytest
from runcast_server.core.auth import create_token
from runcast_server.core.screened_task import QUARANTINE_TASK
from runcast_server.inbox import quarantine
from runcast_server.inbox.models import InboxRow
from runcast_server.tasks import CONTRACT, INGEST_TASK

from backend.helpers import counts, metrics, started


@pytest.fixture
def token(db: Any, embedded: Any) -> str:
    with db.scope() as session:
        return create_token(session, "demo")


@pytest.fixture
def ingest_batch(ctx: Any) -> Any:
    """The ingest task as registered on the test app's own Celery app (it runs with that app's context)."""
    return ctx.celery.tasks[INGEST_TASK]


@pytest.fixture
def quarantine_message(ctx: Any) -> Any:
    return ctx.celery.tasks[QUARANTINE_TASK]


def inbox_rows(db: Any) -> list[tuple[str, int, str | None]]:
    with db.scope() as session:
        return [(r.state, r.events, r.error) for r in session.query(InboxRow).order_by(InboxRow.id)]


def test_task_name_and_contract(ingest_batch: Any) -> None:
    assert ingest_batch.name == INGEST_TASK == "runcast.ingest_batch"
    assert CONTRACT == 2


def test_legacy_message_with_token_is_adopted_and_stored(ingest_batch: Any, db: Any, token: str) -> None:
    """A contract-1 message (events and token in the message) goes through the inbox."""
    out = ingest_batch.apply(kwargs={"events": [started(), metrics(1, {"a": "NaN"})], "project_id": None,
                                     "token": token}).get()
    assert out == {"state": "done", "points": 1, "events": 1}
    assert counts(db.engine)["points"] == 1
    assert inbox_rows(db) == [("done", 2, None)]


def test_legacy_message_with_bad_token_is_quarantined_not_dropped(ingest_batch: Any, db: Any, token: str) -> None:
    before = counts(db.engine)
    out = ingest_batch.apply(kwargs={"events": [started()], "project_id": None, "token": "rc_wrong"}).get()
    assert out == {"state": None}
    assert counts(db.engine) == before
    [(state, events, error)] = inbox_rows(db)
    assert (state, events) == ("quarantined", 1) and "token" in error


@pytest.mark.parametrize(
    "events, stored_points, bad",
    [
        ([started(), metrics(-1, {"a": 1}), metrics(2, {"a": 2.0})], 1, [1]),  # one invalid event
        ([started(project="other")], 0, [0]),  # run_started of another project
    ],
    ids=["invalid-event", "other-project"],
)
def test_hopeless_events_are_quarantined_and_their_siblings_stored(ingest_batch: Any, db: Any,
    token: str, events: list[dict[str, Any]], stored_points: int, bad: list[int]
) -> None:
    out = ingest_batch.apply(kwargs={"events": events, "project_id": None, "token": token}).get()
    assert out["state"] == "quarantined"
    assert counts(db.engine)["points"] == stored_points
    with db.scope() as session:
        [row] = session.query(InboxRow).all()
        assert [b["index"] for b in row.bad_events] == bad
        assert row.body is not None  # kept for `runcast quarantine retry`


def test_unknown_run_is_retried_then_quarantined(ingest_batch: Any, db: Any, token: str) -> None:
    """A legacy batch that overtook its run_started: retried (eager: the caller is told when)."""
    kwargs = {"events": [metrics(1, {"a": 1}, run="run_later001")], "project_id": None, "token": token}
    out = ingest_batch.apply(kwargs=kwargs).get()
    assert out["state"] == "pending" and out["retry_in"] == 5.0
    assert counts(db.engine)["runs"] == 0
    assert [s for s, _, _ in inbox_rows(db)] == ["pending"]


def test_unknown_contract_is_refused_loudly(ingest_batch: Any, db: Any, token: str,
                                           caplog: pytest.LogCaptureFixture) -> None:
    before = counts(db.engine)
    assert ingest_batch.apply(kwargs={"contract": 99, "inbox_id": 1}).get() == {"state": None}
    assert counts(db.engine) == before
    assert "contract 99" in caplog.text and "upgrade the worker" in caplog.text


@pytest.mark.parametrize(
    "kwargs, error",
    [
        ({"contract": 2, "inbox_id": "abc"}, "'inbox_id' is 'abc', not an inbox row id"),
        ({"contract": 2}, "'inbox_id' is missing"),
        ({"contract": 2, "inbox_id": 2**63}, f"'inbox_id' is {2**63}, not an inbox row id"),
        ({"contract": "2", "inbox_id": 1}, "'contract' is '2', not a task contract number"),
        ({"contract": True, "inbox_id": 1}, "'contract' is True"),
        ({"inbox_id": 1}, "'contract' is missing"),
        ({"events": {"a": 1}, "token": "t"}, "'events' is dict, not a list"),
        ({"events": [], "project_id": "1"}, "'project_id' is '1', not a project id"),
        ({"events": [], "token": ["t"]}, "'token' is list, not a string"),
        ({"events": [], "token": "t", "received_at": "now"}, "'received_at' is 'now', not a time"),
    ],
)
def test_an_unreadable_message_is_quarantined_once(ingest_batch: Any, db: Any, token: str, kwargs: dict[str, Any],
                                                   error: str) -> None:
    """Not a contract this worker reads: a quarantined row naming the message, nothing stored."""
    before = counts(db.engine)
    assert ingest_batch.apply(kwargs=kwargs, task_id="msg-1").get() == {"state": None}
    assert counts(db.engine) == before
    [(state, events, text)] = inbox_rows(db)
    assert (state, events) == ("quarantined", 0)
    assert text.startswith(f"unreadable broker message msg-1 of {INGEST_TASK}: {error}")


def test_a_message_the_worker_refused_is_recorded_as_a_quarantined_row(quarantine_message: Any, db: Any,
                                                                       embedded: Any) -> None:
    """What core.screened_task sends for a message it refused; NUL and lone surrogates escaped."""
    out = quarantine_message.apply(kwargs={"message_id": "m\x00\ud800", "task": INGEST_TASK,
                                           "reason": "the body nests more than 100 levels deep",
                                           "excerpt": '[[], {"events": [{"a":{"a":'}).get()
    assert out["state"] == "quarantined"
    with db.scope() as session:
        [row] = session.query(InboxRow).all()
        assert (row.id, row.state, row.project_id, row.events, row.body) == (out["inbox_id"], "quarantined", None, 0,
                                                                               None)
        assert row.error == ("unreadable broker message m\\x00\\ud800 of runcast.ingest_batch: the body nests more "
                             "than 100 levels deep; it begins: '[[], {\"events\": [{\"a\":{\"a\":'")
        assert quarantine.retry(session, row.id, 0.0) is False  # nothing to send through the worker again
