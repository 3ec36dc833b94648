"""`runcast db upgrade` reaches head on empty PostgreSQL and SQLite; the app refuses a stale schema."""

from __future__ import annotations

import math
import random
import sqlite3
import subprocess
from contextlib import closing
from pathlib import Path
from typing import Any

import pytest
from runcast_server.core import migrate
from runcast_server.core.db import make_engine
from services import BIN, child_env, free_port, wait_until
from sqlalchemy import inspect, text
from sqlalchemy.exc import OperationalError

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
    assert _without_rowid(db) == {"points": True, "rollups": True}


def test_app_refuses_database_not_at_head_in_process(empty_pg, redis_server, tmp_path, monkeypatch):
    from fastapi.testclient import TestClient
    from runcast_server.app import create_app
    from runcast_server.core.settings import Settings

    monkeypatch.setenv("RUNCAST_DATABASE_URL", empty_pg)
    monkeypatch.setenv("RUNCAST_REDIS_URL", redis_server.url())
    monkeypatch.setenv("RUNCAST_DATA_DIR", str(tmp_path))
    with pytest.raises(migrate.SchemaOutOfDate, match=r"runcast db upgrade"), TestClient(create_app(Settings())):
        pass


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
    from runcast_server.tables import METADATA

    if dialect == "sqlite":
        url = f"sqlite:///{tmp_path / 'm.db'}"
        migrate.upgrade(url)
    else:
        url = request.getfixturevalue("empty_pg")
        migrate.upgrade(url)
    engine = make_engine(url)
    try:
        with engine.connect() as conn:
            assert compare_metadata(MigrationContext.configure(conn), METADATA) == []
        if dialect == "sqlite":  # compare_metadata leaves out table options (WITHOUT ROWID, 0014)
            options = inspect(engine).get_table_options
            assert {t.name: options(t.name).get("sqlite_with_rowid", True) for t in METADATA.sorted_tables} == {
                t.name: t.dialect_options["sqlite"]["with_rowid"] for t in METADATA.sorted_tables}
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


_PRIMARY_KEYS = {"points": "series_id, step", "rollups": "series_id, level, bucket"}


def _without_rowid(db: Path) -> dict[str, bool]:
    with closing(sqlite3.connect(db)) as conn:
        return {name: "WITHOUT ROWID" in sql for name, sql in conn.execute(
            "SELECT name, sql FROM sqlite_master WHERE name IN ('points', 'rollups')")}


def _contents(db: Path) -> dict[str, list[tuple[Any, ...]]]:
    """Every row of points and rollups, in primary-key order."""
    with closing(sqlite3.connect(db)) as conn:
        return {table: conn.execute(f"SELECT * FROM {table} ORDER BY {key}").fetchall()
                for table, key in _PRIMARY_KEYS.items()}


def _fill_points_and_rollups(db: Path) -> None:
    """Rows of four series at 0013, NULLs and infinities among them, inserted out of key order."""
    rng = random.Random(14)
    series = (7, 1, 2**40 + 3, 2)
    points = [(s, step, None if step % 5 == 0 else rng.uniform(-1e6, 1e6), step // 100 + 1)
              for s in series for step in range(0, 3000, 3)]
    rollups = [(s, level, bucket, None if bucket % 4 == 0 else -math.inf, None if bucket % 4 == 0 else 2.5,
                rng.uniform(-10, 10), bucket, bucket % 3, None if bucket % 2 else 1.5, (bucket << level) + 1)
               for s in series for level in (3, 6, 9) for bucket in range(40)]
    rng.shuffle(points)
    rng.shuffle(rollups)
    with closing(sqlite3.connect(db)) as conn, conn:
        conn.executemany("INSERT INTO points VALUES (?, ?, ?, ?)", points)
        conn.executemany("INSERT INTO rollups VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)", rollups)


def test_without_rowid_upgrade_and_downgrade_keep_every_row(tmp_path):
    """0014 on SQLite rebuilds points and rollups WITHOUT ROWID, and its downgrade as rowid
    tables again; each copies every row exactly."""
    from alembic import command

    db = tmp_path / "r.db"
    url = f"sqlite:///{db}"
    migrate.upgrade(url, "0013")
    _fill_points_and_rollups(db)
    before = _contents(db)
    assert _without_rowid(db) == {"points": False, "rollups": False}
    migrate.upgrade(url, "0014")
    assert _without_rowid(db) == {"points": True, "rollups": True}
    assert _contents(db) == before
    command.downgrade(migrate.alembic_config(url), "0013")
    assert _without_rowid(db) == {"points": False, "rollups": False}
    assert _contents(db) == before


def test_without_rowid_upgrade_stopped_half_way_changes_nothing(tmp_path):
    """Both tables are rebuilt in one transaction: an upgrade that fails at rollups, after
    points was rebuilt, leaves points as it was and the database at 0013."""
    db = tmp_path / "h.db"
    url = f"sqlite:///{db}"
    migrate.upgrade(url, "0013")
    _fill_points_and_rollups(db)
    before = _contents(db)
    with closing(sqlite3.connect(db)) as conn:
        conn.execute("CREATE TABLE rollups_rebuilt (x)")  # the name 0014 builds rollups under, taken
    with pytest.raises(OperationalError, match="rollups_rebuilt already exists"):
        migrate.upgrade(url, "0014")
    assert _without_rowid(db) == {"points": False, "rollups": False}
    assert _contents(db) == before
    with closing(sqlite3.connect(db)) as conn:
        tables = {name for (name,) in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
        assert conn.execute("SELECT version_num FROM alembic_version").fetchall() == [("0013",)]
    assert "points_rebuilt" not in tables


def test_partitions_upgrade_from_0012_keeps_every_point_and_downgrades(empty_pg):
    """0013 on PostgreSQL: the tables as they were become the legacy partitions (no row lost, the
    old run stays writable in them); a new run gets partitions of its own; the downgrade copies
    every row of both back into plain tables."""
    from alembic import command

    migrate.upgrade(empty_pg, "0012")
    engine = make_engine(empty_pg)
    try:
        with engine.begin() as conn:
            for statement in _V1_ROWS:
                conn.execute(text(statement.replace("'r1'", "'legacy-1'")))
            conn.execute(text("INSERT INTO points (series_id, step, value, version)"
                              " SELECT 1, s, s * 0.5, 1 FROM generate_series(3, 1002) s"))
            conn.execute(text("INSERT INTO run_versions (run_id, version, status, committed_at, points, ranges,"
                              " event_ids) VALUES ('legacy-1', 1, 'running', 0, 1002, '[]', '[]')"))
        engine.dispose()
        migrate.upgrade(empty_pg)
        with engine.connect() as conn:
            assert conn.execute(text("SELECT count(*), sum(step) FROM points_legacy")).one() == (1002, 502503)
            assert conn.execute(text("SELECT count(*) FROM run_versions_legacy")).scalar() == 1
            assert conn.execute(text("SELECT block FROM runs")).scalar() == 0
            kinds = dict(conn.execute(text(
                "SELECT c.relname, p.partstrat FROM pg_partitioned_table p JOIN pg_class c ON c.oid = p.partrelid")).all())
            assert kinds == {"points": "r", "rollups": "r", "run_versions": "l"}
        _store_two_runs(empty_pg)
        with engine.connect() as conn:
            assert conn.execute(text("SELECT count(*) FROM points_legacy"
                                       " WHERE series_id IN (SELECT id FROM series WHERE key <> '_timestamp')")).scalar() == 1002 + 3
            assert conn.execute(text("SELECT block FROM runs WHERE id = 'run-two-2'")).scalar() == 1 << 16
            assert conn.execute(text("SELECT count(*) FROM points_b65536"
                                       " WHERE series_id IN (SELECT id FROM series WHERE key <> '_timestamp')")).scalar() == 3
        command.downgrade(migrate.alembic_config(empty_pg), "0012")
        with engine.connect() as conn:
            assert conn.execute(text("SELECT count(*) FROM points"
                                       " WHERE series_id IN (SELECT id FROM series WHERE key <> '_timestamp')")).scalar() == 1002 + 6
            assert conn.execute(text("SELECT count(*) FROM run_versions")).scalar() == 3
            assert conn.execute(text(
                "SELECT count(*) FROM pg_partitioned_table")).scalar() == 0
            assert migrate.current_revision(engine) == "0012"
        migrate.upgrade(empty_pg)  # and up again, over rows of both kinds of run
        with engine.connect() as conn:
            assert conn.execute(text("SELECT count(*) FROM points_legacy"
                                       " WHERE series_id IN (SELECT id FROM series WHERE key <> '_timestamp')")).scalar() == 1002 + 6
    finally:
        engine.dispose()


def _store_two_runs(url: str) -> None:
    """One batch of 3 points for the legacy run and for a new run of project 1."""
    from runcast.wire.events import validate_event
    from runcast_server.ingest.store import store_batch
    from sqlalchemy.orm import Session

    engine = make_engine(url)
    try:
        with Session(engine) as session, session.begin():
            session.execute(text("INSERT INTO segments (id, run_id, uid, \"index\", start_step, resumed)"
                                 " VALUES (2, 'legacy-1', 'segment-2', 1, 0, false)"))
            for table in ("series", "segments", "events"):  # _V1_ROWS wrote ids by hand
                session.execute(text(f"SELECT setval('{table}_id_seq', 2)"))
            events = [
                {"v": 1, "type": "run_started", "run": "run-two-2", "segment": "segment-3", "seq": 0, "ts": 1.0,
                 "name": "two", "project": "p"},
                *({"v": 1, "type": "metrics", "run": run, "segment": seg, "seq": 1 + i, "ts": 2.0, "step": 5000 + i,
                   "values": {"loss": 1.0}} for run, seg in (("legacy-1", "segment-2"), ("run-two-2", "segment-3")) for i in range(3)),
            ]
            store_batch(session, 1, [validate_event(e) for e in events])
    finally:
        engine.dispose()

