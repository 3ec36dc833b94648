"""Stream test servers: the embedded default (`runcast serve`, SQLite, in-process hub) and the
production stack (PostgreSQL + Redis + a Celery worker + one API process)."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest

from stream.helpers import RunWriter


@dataclass
class Server:
    mode: str
    url: str
    token: str
    api: httpx.Client
    new_token: Callable[[str], str]  # a token of another project

    def writer(self, **kw: Any) -> RunWriter:
        return RunWriter(self.api, self.token, **kw)

    def stream_url(self, run: str, last_event_id: int | None = None) -> str:
        q = "" if last_event_id is None else f"?last_event_id={last_event_id}"
        return f"{self.url}/api/v1/runs/{run}/stream{q}"


def _embedded(processes: Any, tmp_path: Path, env: dict[str, str]) -> tuple[str, Callable[[str], str]]:
    data = {"RUNCAST_DATA_DIR": str(tmp_path / "data")}

    def token(project: str) -> str:
        return processes.cli("token", "create", "--project", project, **data).stdout.strip().splitlines()[-1]

    token("demo")  # creates the database before the server starts
    processes.start_api(**data, **env)
    return processes.api_url, token


def _production(stack: Any, env: dict[str, str]) -> tuple[str, Callable[[str], str]]:
    stack.start_worker()
    stack.start_api(**env)
    return stack.api_url, stack.token


@pytest.fixture
def start_server(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Callable[..., Server]]:
    """``start_server(mode, **env)``: an API (and worker) in ``mode`` with extra RUNCAST_* settings."""
    clients: list[httpx.Client] = []

    def start(mode: str = "embedded", **env: str) -> Server:
        if mode == "embedded":
            url, new_token = _embedded(request.getfixturevalue("processes"), tmp_path, env)
        else:
            url, new_token = _production(request.getfixturevalue("stack"), env)
        api = httpx.Client(base_url=url, timeout=30)
        clients.append(api)
        return Server(mode, url, new_token("demo"), api, new_token)

    yield start
    for c in clients:
        c.close()


MODES = ["embedded", pytest.param("production", marks=pytest.mark.services)]


@pytest.fixture(params=MODES)
def server(request: pytest.FixtureRequest, start_server: Callable[..., Server]) -> Server:
    """A server in each mode with default stream settings."""
    return start_server(request.param)
