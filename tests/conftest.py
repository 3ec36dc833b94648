"""Shared fixtures: real PostgreSQL, Redis, Celery workers and API processes; the embedded app.

Session-scoped servers (started once, on first use):

``pg_server``      a PostgreSQL cluster on a free 127.0.0.1 port (``services.PostgresServer``)
``pg_template``    name of a database in it migrated to head, the template for fresh ones
``redis_server``   a redis-server on a free port (``services.RedisServer``)

Per test:

``pg_url``         URL of a fresh PostgreSQL database at head (a copy of the template), dropped after
``stack``          a ``ProductionStack``: fresh database, flushed Redis, temp data dir, and
                   ``start_worker()`` / ``start_api()`` / ``token()`` / ``cli()`` helpers;
                   every process it started is stopped after the test, and their logs are
                   attached to the report of a failing test
``processes``      a bare ``Processes``: the same start_api()/start_worker()/cli() helpers with
                   no RUNCAST_* preset (e.g. ``runcast serve`` in the embedded default)
``embedded``       ``TestClient(create_app(Settings()))`` on a temp RUNCAST_DATA_DIR, no Redis,
                   no database URL (SQLite, eager tasks)
``embedded_env``   the temp data dir behind ``embedded`` (a Path)
``ctx``            the application context of the test's app (``client`` if the test has one,
                   else ``embedded``); ``db`` and ``settings`` are its database and settings:
                   nothing in the server holds a database or settings of its own

Tests that use a server fixture get the ``services`` marker automatically, so
``scripts/test -m "not services"`` runs without any of them.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import services
from runcast_server.core import migrate
from runcast_server.core.db import make_engine
from services import BIN, PostgresServer, Process, RedisServer, child_env
from sqlalchemy import Engine

# The SDK's system sampler (runcast.system) adds points to every run that has a server;
# tests that count points would see them. The tests of the sampler turn it on themselves.
os.environ["RUNCAST_SYSTEM_INTERVAL"] = "off"

SERVICE_FIXTURES = {"pg_server", "pg_template", "pg_url", "redis_server", "stack"}

_LOGS = pytest.StashKey[list[tuple[str, Path]]]()


# --- markers and failure reports ------------------------------------------------------------


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    for item in items:
        if SERVICE_FIXTURES.intersection(getattr(item, "fixturenames", ())):
            item.add_marker(pytest.mark.services)
    # Files holding a slow test run first: pytest-xdist hands out files in this order
    # (scripts/test: --no-loadscope-reorder), and a long file handed out last ends the suite alone.
    slow_files = {item.path for item in items if item.get_closest_marker("slow")}
    items.sort(key=lambda item: item.path not in slow_files)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[Any]) -> Any:
    report = yield
    if report.failed:
        for name, path in item.stash.get(_LOGS, []):
            report.sections.append((f"{name} log ({path})", services.tail(path)))
    # Reports cross to the controller as UTF-8 under pytest-xdist: a test's log may hold the lone
    # surrogates it sends on purpose (tests/backend/test_tasks.py), written out as escapes.
    report.sections = [(title, text.encode("utf-8", "backslashreplace").decode("utf-8"))
                       for title, text in report.sections]
    return report


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    services.stop_all()


def attach_log(request: pytest.FixtureRequest, name: str, path: Path) -> None:
    """Show ``path`` in the report if the requesting test fails."""
    node = request.node
    if _LOGS not in node.stash:
        node.stash[_LOGS] = []
    node.stash[_LOGS].append((name, path))


# --- session servers ----------------------------------------------------------------------------


@pytest.fixture(scope="session")
def pg_server() -> Iterator[PostgresServer]:
    server = PostgresServer()
    try:
        server.start()
        yield server
    finally:
        server.stop()


@pytest.fixture(scope="session")
def pg_template(pg_server: PostgresServer) -> str:
    """A database migrated to head once; fresh databases are copies of it (fast)."""
    from runcast_server.core import migrate

    name = pg_server.create_database("runcast_template")
    migrate.upgrade(pg_server.url(name))
    return name


@pytest.fixture(scope="session")
def redis_server() -> Iterator[RedisServer]:
    server = RedisServer()
    try:
        server.start()
        yield server
    finally:
        server.stop()


@pytest.fixture
def pg_url(pg_server: PostgresServer, pg_template: str) -> Iterator[str]:
    """A fresh database at head for this test; dropped afterwards."""
    name = pg_server.create_database(template=pg_template)
    try:
        yield pg_server.url(name)
    finally:
        pg_server.drop_database(name)


# --- the production stack ----------------------------------------------------------------------


class Processes:
    """Runcast processes for one test (API servers, workers, SDK drivers), all stopped after it.

    ``env`` holds the RUNCAST_* settings every process gets (empty here: set what the test
    needs per call, e.g. ``start_api(RUNCAST_DATA_DIR=...)``). Logs go to ``log_dir`` and are
    attached to the report of a failing test.
    """

    def __init__(self, request: pytest.FixtureRequest, tmp: Path) -> None:
        self._request = request
        self.tmp = tmp
        self.log_dir = tmp / "logs"
        self.log_dir.mkdir(parents=True, exist_ok=True)
        self.env: dict[str, str] = {}
        self.processes: list[Process] = []
        self.api_url: str | None = None
        self._counts: dict[str, int] = {}

    def _log_path(self, name: str) -> Path:
        n = self._counts[name] = self._counts.get(name, 0) + 1
        path = self.log_dir / (f"{name}.log" if n == 1 else f"{name}.{n}.log")
        attach_log(self._request, name if n == 1 else f"{name} (start {n})", path)
        return path

    def start_worker(
        self, *, concurrency: int = 1, pool: str = "solo", name: str = "worker", **env: str
    ) -> Process:
        """A Celery worker (``runcast worker``); returns once it is ready to consume."""
        proc = services.start_worker(
            {**self.env, **env},
            self._log_path(name),
            concurrency=concurrency,
            pool=pool,
            name=name,
        )
        self.processes.append(proc)
        return proc

    def start_api(self, *, port: int | None = None, name: str = "api", **env: str) -> Process:
        """``runcast serve`` on ``port`` (default: a free one); sets ``api_url``."""
        proc, url = services.start_api(
            {**self.env, **env}, self._log_path(name), port=port, name=name
        )
        self.processes.append(proc)
        self.api_url = url
        return proc

    def cli(self, *args: str, check: bool = True, timeout: float = 120, **env: str) -> subprocess.CompletedProcess[str]:
        """Run ``runcast ARGS`` with these settings."""
        res = subprocess.run(
            [str(BIN / "runcast"), *args],
            env=child_env({**self.env, **env}),
            check=False,
            capture_output=True,
            text=True,
            timeout=timeout,
        )
        if check and res.returncode != 0:
            raise AssertionError(
                f"runcast {' '.join(args)} exited {res.returncode}:\n{res.stdout}\n{res.stderr}"
            )
        return res

    def stop(self) -> None:
        for proc in reversed(self.processes):
            proc.stop()
        self.processes.clear()


class ProductionStack(Processes):
    """PostgreSQL + Redis + Celery workers + API processes for one test.

    ``env`` sets RUNCAST_DATABASE_URL (a fresh database at head), RUNCAST_REDIS_URL (a
    flushed Redis) and RUNCAST_DATA_DIR (a temp dir) for every process it starts.
    """

    def __init__(
        self,
        request: pytest.FixtureRequest,
        pg: PostgresServer,
        redis: RedisServer,
        database_url: str,
        tmp: Path,
    ) -> None:
        super().__init__(request, tmp)
        self.pg = pg
        self.redis = redis
        self.database_url = database_url
        self.redis_url = redis.url(0)
        self.data_dir = tmp / "data"
        self.data_dir.mkdir(parents=True, exist_ok=True)
        self.env = {
            "RUNCAST_DATABASE_URL": database_url,
            "RUNCAST_REDIS_URL": self.redis_url,
            "RUNCAST_DATA_DIR": str(self.data_dir),
        }
        self._engine = None

    @property
    def engine(self):  # type: ignore[no-untyped-def]
        """A SQLAlchemy engine on this test's database (for exact table comparisons)."""
        if self._engine is None:
            from runcast_server.core.db import make_engine

            self._engine = make_engine(self.database_url)
        return self._engine

    def token(self, project: str = "test") -> str:
        """A fresh ingest token for ``project`` (created if missing)."""
        from runcast_server.core.auth import create_token
        from sqlalchemy.orm import Session

        with Session(self.engine) as session:
            token = create_token(session, project, label="tests")
            session.commit()
        return token

    def stop(self) -> None:
        super().stop()
        if self._engine is not None:
            self._engine.dispose()
            self._engine = None


@pytest.fixture
def processes(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Processes]:
    """A bare ``Processes`` (no database, no Redis): for the embedded default as a server."""
    p = Processes(request, tmp_path)
    try:
        yield p
    finally:
        p.stop()


@pytest.fixture
def stack(
    request: pytest.FixtureRequest,
    pg_server: PostgresServer,
    redis_server: RedisServer,
    pg_url: str,
    tmp_path: Path,
) -> Iterator[ProductionStack]:
    redis_server.client().flushall()
    s = ProductionStack(request, pg_server, redis_server, pg_url, tmp_path)
    try:
        yield s
    finally:
        s.stop()


# --- the embedded default -----------------------------------------------------------------------


@pytest.fixture(scope="session")
def sqlite_at_head(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """An embedded database file migrated to head once, copied into each ``embedded_env``: the
    app's start-up upgrade then finds nothing to do (0.02 s instead of 0.2-0.3 s a test). The
    migrations themselves are tested from an empty file (tests/integration/test_migrations.py)."""
    path = tmp_path_factory.mktemp("sqlite-at-head") / "runcast.db"
    migrate.upgrade(f"sqlite:///{path}")
    return path


@pytest.fixture
def embedded_env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, sqlite_at_head: Path) -> Iterator[Path]:
    """RUNCAST_DATA_DIR set to a temp dir holding a database at head, every other RUNCAST_* unset
    (``Settings()`` reads them)."""
    for key in list(os.environ):
        if key.startswith("RUNCAST_"):
            monkeypatch.delenv(key)
    data_dir = tmp_path / "runcast-data"
    data_dir.mkdir()
    shutil.copyfile(sqlite_at_head, data_dir / "runcast.db")
    monkeypatch.setenv("RUNCAST_DATA_DIR", str(data_dir))
    yield data_dir


@pytest.fixture
def embedded(embedded_env: Path) -> Iterator[Any]:
    """A TestClient on ``create_app(Settings())`` in the embedded default (its lifespan has run)."""
    from fastapi.testclient import TestClient
    from runcast_server.app import create_app
    from runcast_server.core.settings import Settings

    with TestClient(create_app(Settings())) as client:
        yield client


@pytest.fixture
def ctx(request: pytest.FixtureRequest) -> Any:
    """The application context of the test's app: its ``client`` fixture's if it has one, else ``embedded``'s."""
    client = request.getfixturevalue("client" if "client" in request.fixturenames else "embedded")
    return client.app.state.context


@pytest.fixture
def db(ctx: Any) -> Any:
    """The database of the test's app (``ctx.database``: ``db.scope()``, ``db.engine``)."""
    return ctx.database


@pytest.fixture
def settings(ctx: Any) -> Any:
    """The settings of the test's app (``ctx.settings``)."""
    return ctx.settings


@pytest.fixture
def wait_for():  # type: ignore[no-untyped-def]
    """``wait_for(check, timeout, what)``: poll until ``check()`` is truthy, then return it."""

    def _wait(check: Any, timeout: float = 60, what: str = "condition", interval: float = 0.2) -> Any:
        return services.wait_until(check, timeout, what, interval)

    return _wait


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
