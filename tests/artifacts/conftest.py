"""Fixtures for the artifact tests: the embedded app with a storage root, and runs written through ``store_batch``."""

from __future__ import annotations

import hashlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from api.writer import TrainerSim, project_token


class Seeder:
    """Projects (with tokens) and runs in the embedded database."""

    def __init__(self, db: Any) -> None:
        self.db = db  # the app's database (core.db.Database)
        self.tokens: dict[str, tuple[str, int]] = {}

    def project(self, project: str = "demo") -> tuple[str, int]:
        if project not in self.tokens:
            with self.db.scope() as session:
                self.tokens[project] = project_token(session, project)
        return self.tokens[project]

    def token(self, project: str = "demo") -> str:
        return self.project(project)[0]

    def run(self, project: str = "demo", **kwargs: Any) -> TrainerSim:
        _, project_id = self.project(project)
        return TrainerSim(self.db.scope, project_id, project, **kwargs)


@pytest.fixture
def storage_root(embedded_env: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """RUNCAST_STORAGE_ROOT for the app (a temp dir)."""

    root = embedded_env.parent / "storage"
    root.mkdir()
    monkeypatch.setenv("RUNCAST_STORAGE_ROOT", str(root))
    return root


@pytest.fixture
def client(storage_root: Path) -> Iterator[Any]:
    from fastapi.testclient import TestClient
    from runcast_server.app import create_app

    with TestClient(create_app()) as c:
        yield c


@pytest.fixture
def seed(client: Any) -> Seeder:
    return Seeder(client.app.state.context.database)


def write_file(path: Path, size: int, seed: int = 0) -> str:
    """A file of ``size`` deterministic bytes; returns its sha256."""
    path.parent.mkdir(parents=True, exist_ok=True)
    block = hashlib.sha256(str(seed).encode()).digest() * 2048  # 64 KiB
    digest = hashlib.sha256()
    with open(path, "wb") as f:
        left = size
        while left:
            piece = block[: min(left, len(block))]
            f.write(piece)
            digest.update(piece)
            left -= len(piece)
    return digest.hexdigest()


def checkpoint_event(sim: TrainerSim, path: str, step: int, size: int, sha: str | None, **fields: Any) -> dict[str, Any]:
    return sim.event("checkpoint", step=step, path=path, size=size, sha256=sha, metrics=fields.pop("metrics", {}), **fields)
