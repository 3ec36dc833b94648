"""Fixtures for the read-path tests: the embedded app and data written through ``store_batch``."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from api.writer import TrainerSim, hold_blob, project_token


class Seeder:
    """Makes projects (with tokens) and runs in the embedded database."""

    def __init__(self, db: Any) -> None:
        self.db = db  # the app's database (core.db.Database)
        self.tokens: dict[str, tuple[str, int]] = {}

    def token(self, project: str = "demo") -> str:
        return self._project(project)[0]

    def _project(self, project: str) -> tuple[str, int]:
        if project not in self.tokens:
            with self.db.scope() as session:
                self.tokens[project] = project_token(session, project)
        return self.tokens[project]

    def blob(self, project: str, data: bytes, **kwargs: Any) -> str:
        """Record ``data`` as a blob of ``project`` (``writer.hold_blob``); returns its SHA-256."""
        _, project_id = self._project(project)
        with self.db.scope() as session:
            return hold_blob(session, project_id, data, **kwargs)

    def run(self, project: str = "demo", **kwargs: Any) -> TrainerSim:
        """A ``TrainerSim`` of ``project``; call ``.start()`` on it to create the run."""
        _, project_id = self._project(project)
        return TrainerSim(self.db.scope, project_id, project, **kwargs)


@pytest.fixture
def client(embedded: Any) -> Any:
    """The TestClient of the embedded app (migrated SQLite in a temp data dir)."""
    return embedded


@pytest.fixture
def seed(client: Any) -> Seeder:
    return Seeder(client.app.state.context.database)


@pytest.fixture
def auth() -> Callable[[str], dict[str, str]]:
    return lambda token: {"Authorization": f"Bearer {token}"}
