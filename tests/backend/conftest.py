"""A database at head on SQLite and on PostgreSQL, for the store_batch tests."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from runcast_server import migrate
from runcast_server.auth import get_or_create_project
from runcast_server.db import make_engine
from sqlalchemy import Engine
from sqlalchemy.orm import Session


@pytest.fixture(params=["sqlite", pytest.param("postgresql", marks=pytest.mark.services)])
def engine(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Engine]:
    """An engine on a fresh database at head (the PostgreSQL one needs the services)."""
    if request.param == "sqlite":
        url = f"sqlite:///{tmp_path / 'runcast.db'}"
        migrate.upgrade(url)
    else:
        url = request.getfixturevalue("pg_url")
    eng = make_engine(url)
    try:
        yield eng
    finally:
        eng.dispose()


@pytest.fixture
def project_id(engine: Engine) -> int:
    with Session(engine) as session:
        pid = get_or_create_project(session, "demo").id
        session.commit()
    return pid
