"""`runcast db upgrade` reaches head on empty PostgreSQL and SQLite; the app refuses a stale schema."""

from __future__ import annotations

import sqlite3
import subprocess

import pytest
from runcast_server import migrate
from runcast_server.db import make_engine
from services import BIN, child_env, free_port, wait_until
from sqlalchemy import inspect

EXPECTED_TABLES = {
    "projects", "ingest_tokens", "runs", "segments", "series", "points", "rollups", "events",
}


def _runcast(env: dict[str, str], *args: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(BIN / "runcast"), *args], env=child_env(env), check=False, capture_output=True, text=True, timeout=timeout
    )


@pytest.fixture
def empty_pg(pg_server):
    name = pg_server.create_database()
    try:
        yield pg_server.url(name)
    finally:
        pg_server.drop_database(name)


def test_db_upgrade_on_empty_postgres_reaches_head(empty_pg, tmp_path):
    engine = make_engine(empty_pg)
    try:
        assert migrate.current_revision(engine) is None
        res = _runcast({"RUNCAST_DATABASE_URL": empty_pg, "RUNCAST_DATA_DIR": str(tmp_path)}, "db", "upgrade")
        assert res.returncode == 0, res.stderr
        head = migrate.head_revision(empty_pg)
        assert head and head in res.stdout
        assert migrate.current_revision(engine) == head
        assert EXPECTED_TABLES <= set(inspect(engine).get_table_names())
        # Idempotent: a second upgrade is a no-op that succeeds.
        again = _runcast({"RUNCAST_DATABASE_URL": empty_pg, "RUNCAST_DATA_DIR": str(tmp_path)}, "db", "upgrade")
        assert again.returncode == 0, again.stderr
        assert migrate.current_revision(engine) == head
    finally:
        engine.dispose()


def test_db_upgrade_on_empty_sqlite_reaches_head(tmp_path):
    data_dir = tmp_path / "data"
    res = _runcast({"RUNCAST_DATA_DIR": str(data_dir)}, "db", "upgrade")
    assert res.returncode == 0, res.stderr
    db = data_dir / "runcast.db"
    assert db.exists()
    url = f"sqlite:///{db}"
    with sqlite3.connect(db) as conn:
        [(rev,)] = conn.execute("SELECT version_num FROM alembic_version").fetchall()
        tables = {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type='table'")}
    assert rev == migrate.head_revision(url)
    assert EXPECTED_TABLES <= tables


def test_app_refuses_database_not_at_head_in_process(empty_pg, redis_server, tmp_path, monkeypatch):
    from fastapi.testclient import TestClient
    from runcast_server.app import create_app
    from runcast_server.db import reset_engine
    from runcast_server.settings import get_settings

    monkeypatch.setenv("RUNCAST_DATABASE_URL", empty_pg)
    monkeypatch.setenv("RUNCAST_REDIS_URL", redis_server.url())
    monkeypatch.setenv("RUNCAST_DATA_DIR", str(tmp_path))
    get_settings.cache_clear()
    reset_engine()
    try:
        with pytest.raises(migrate.SchemaOutOfDate, match=r"runcast db upgrade"), TestClient(create_app()):
            pass
    finally:
        get_settings.cache_clear()
        reset_engine()


def test_serve_refuses_database_not_at_head(empty_pg, redis_server, tmp_path):
    env = {
        "RUNCAST_DATABASE_URL": empty_pg,
        "RUNCAST_REDIS_URL": redis_server.url(),
        "RUNCAST_DATA_DIR": str(tmp_path),
    }
    res = _runcast(env, "serve", "--host", "127.0.0.1", "--port", str(free_port()), timeout=60)
    out = res.stdout + res.stderr
    assert res.returncode != 0, out
    assert "runcast db upgrade" in out, out
    assert "revision none" in out, out


def test_serve_starts_after_upgrade(empty_pg, redis_server, tmp_path):
    import httpx
    from services import Process

    env = {
        "RUNCAST_DATABASE_URL": empty_pg,
        "RUNCAST_REDIS_URL": redis_server.url(),
        "RUNCAST_DATA_DIR": str(tmp_path),
    }
    assert _runcast(env, "db", "upgrade").returncode == 0
    port = free_port()
    proc = Process("api", [str(BIN / "runcast"), "serve", "--host", "127.0.0.1", "--port", str(port)],
                   child_env(env), tmp_path / "api.log")
    try:
        def healthy():
            proc.check_alive("starting")
            return httpx.get(f"http://127.0.0.1:{port}/healthz", timeout=2).json()

        body = wait_until(healthy, 60, "healthz")
        assert body["mode"] == "production"
    finally:
        proc.stop()


@pytest.mark.parametrize("dialect", ["sqlite", "postgresql"])
def test_migrations_match_the_models(dialect, request, tmp_path):
    """Alembic is the only way the schema is made, so head must equal models.py exactly."""
    from alembic.autogenerate import compare_metadata
    from alembic.runtime.migration import MigrationContext
    from runcast_server.models import Base

    if dialect == "sqlite":
        url = f"sqlite:///{tmp_path / 'm.db'}"
        migrate.upgrade(url)
    else:
        url = request.getfixturevalue("empty_pg")
        migrate.upgrade(url)
    engine = make_engine(url)
    try:
        with engine.connect() as conn:
            assert compare_metadata(MigrationContext.configure(conn), Base.metadata) == []
    finally:
        engine.dispose()


# One row in every table that hangs off a run, written at the first revision.
_V1_ROWS = [
    "INSERT INTO projects (id, name, created_at) VALUES (1, 'p', 0)",
    "INSERT INTO runs (id, project_id, name, visibility, status, config, code, env, created_at, last_values, version)"
    " VALUES ('r1', 1, 'n', 'public', 'running', '{}', '{}', '{}', 0, '{}', 1)",
    "INSERT INTO segments (id, run_id, uid, \"index\", start_step, resumed) VALUES (1, 'r1', 'u', 0, 0, false)",
    "INSERT INTO series (id, run_id, segment_id, key, count) VALUES (1, 'r1', 1, 'loss', 2)",
    "INSERT INTO points (series_id, step, value, version) VALUES (1, 1, 2.5, 1), (1, 2, 2.4, 1)",
    "INSERT INTO rollups (series_id, level, bucket, min, max, sum, count, nan_count, last, last_step)"
    " VALUES (1, 1, 0, 2.4, 2.5, 4.9, 2, 0, 2.4, 2)",
    "INSERT INTO events (id, run_id, segment_id, seq, type, step, ts, received_at, payload)"
    " VALUES (1, 'r1', 1, 1, 'note', 1, 0, 0, '{}')",
]
_COUNTED = {"projects": 1, "runs": 1, "segments": 1, "series": 1, "points": 2, "rollups": 1, "events": 1}


@pytest.mark.parametrize("dialect", ["sqlite", "postgresql"])
def test_upgrades_keep_every_row(dialect, request, tmp_path):
    """Upgrading a database that holds a run keeps all of it (on SQLite, a table rebuilt by a
    batch migration must not cascade-delete the rows that reference it)."""
    from sqlalchemy import text

    url = f"sqlite:///{tmp_path / 'u.db'}" if dialect == "sqlite" else request.getfixturevalue("empty_pg")
    migrate.upgrade(url, "0001")
    engine = make_engine(url)
    try:
        with engine.begin() as conn:
            for sql in _V1_ROWS:
                conn.execute(text(sql))
        engine.dispose()
        migrate.upgrade(url)
        with engine.connect() as conn:
            counts = {t: conn.execute(text(f"SELECT count(*) FROM {t}")).scalar() for t in _COUNTED}
            value = conn.execute(text("SELECT value FROM points WHERE step = 2")).scalar()
        assert counts == _COUNTED and value == 2.4
    finally:
        engine.dispose()
