"""The ingest task, run eagerly: token auth, drops what can never succeed, retries what may."""

from __future__ import annotations

from typing import Any

import pytest
from celery.exceptions import Retry
from runcast_server.auth import create_token
from runcast_server.db import get_engine, session_scope
from runcast_server.tasks import INGEST_TASK, ingest_batch

from backend.helpers import counts, metrics, started


@pytest.fixture
def token(embedded: Any) -> str:
    with session_scope() as session:
        return create_token(session, "demo")


def test_task_name_is_the_contract() -> None:
    assert ingest_batch.name == INGEST_TASK == "runcast.ingest_batch"


def test_token_path_stores_batch(token: str) -> None:
    out = ingest_batch.apply(kwargs={"events": [started(), metrics(1, {"a": "NaN"})], "project_id": None, "token": token}).get()
    assert out == {"points": 1, "events": 1}
    assert counts(get_engine())["points"] == 1


@pytest.mark.parametrize(
    "kwargs",
    [
        {"events": [started(), metrics(-1, {"a": 1})], "token": "TOKEN"},  # invalid event
        {"events": [started()], "token": "rc_wrong"},  # bad token
        {"events": [started(project="other")], "token": "TOKEN"},  # project mismatch
    ],
    ids=["invalid-event", "bad-token", "other-project"],
)
def test_hopeless_batches_are_dropped(token: str, kwargs: dict[str, Any]) -> None:
    kwargs = {**kwargs, "token": token if kwargs["token"] == "TOKEN" else kwargs["token"], "project_id": None}
    before = counts(get_engine())
    assert ingest_batch.apply(kwargs=kwargs).get() == {"dropped": len(kwargs["events"])}
    assert counts(get_engine()) == before


def test_unknown_run_is_retried(token: str) -> None:
    # A batch that overtook its run_started (redis:// path): retried, not dropped.
    with pytest.raises(Retry) as retry:
        ingest_batch.apply(kwargs={"events": [metrics(1, {"a": 1}, run="run_later001")], "project_id": None, "token": token})
    assert retry.value.when == 5.0
    assert counts(get_engine())["runs"] == 0
