"""The demo project in the shared ``engine`` database, for the store_batch tests; the app with eager
tasks on SQLite and on PostgreSQL, for the inbox's."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from runcast_server.core.auth import get_or_create_project
from sqlalchemy import Engine
from sqlalchemy.orm import Session


@pytest.fixture
def project_id(engine: Engine) -> int:
    with Session(engine) as session:
        pid = get_or_create_project(session, "demo").id
        session.commit()
    return pid


@pytest.fixture(params=["sqlite", pytest.param("postgresql", marks=pytest.mark.services)])
def client(request: pytest.FixtureRequest, embedded_env: Any, monkeypatch: pytest.MonkeyPatch) -> Iterator[Any]:
    """The app with eager tasks, on SQLite or on PostgreSQL; the timers' intervals long (the tests sweep by hand)."""
    from fastapi.testclient import TestClient
    from runcast_server.app import create_app

    if request.param == "postgresql":
        monkeypatch.setenv("RUNCAST_DATABASE_URL", request.getfixturevalue("pg_url"))
    monkeypatch.setenv("RUNCAST_ALERT_CHECK_INTERVAL_S", "3600")
    monkeypatch.setenv("RUNCAST_INBOX_SWEEP_INTERVAL_S", "3600")
    with TestClient(create_app()) as c:
        yield c
