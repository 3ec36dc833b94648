"""The test infrastructure itself: real servers start, fresh databases are at head."""

from __future__ import annotations

import os

import psycopg
from runcast_server.core import migrate
from runcast_server.core.db import make_engine
from sqlalchemy import text


def test_postgres_cluster_runs_on_loopback(pg_server):
    [(version,)] = pg_server.execute("SHOW server_version")
    assert version.startswith("15")
    [(addr,)] = pg_server.execute("SHOW listen_addresses")
    assert addr == "127.0.0.1"
    [(fsync,)] = pg_server.execute("SHOW fsync")
    assert fsync == "off"


def test_fresh_database_is_at_head_and_empty(pg_url):
    engine = make_engine(pg_url)
    try:
        assert migrate.current_revision(engine) == migrate.head_revision(pg_url)
        migrate.check_schema(engine)
        with engine.connect() as conn:
            assert conn.execute(text("SELECT count(*) FROM runs")).scalar_one() == 0
    finally:
        engine.dispose()


def test_each_test_gets_its_own_database(pg_url, pg_server):
    name = pg_url.rsplit("/", 1)[1]
    names = {r[0] for r in pg_server.execute("SELECT datname FROM pg_database")}
    assert name in names and name != "runcast_template"


def test_redis_server_answers(redis_server):
    client = redis_server.client()
    client.set("k", "v")
    assert client.get("k") == b"v"


def test_stack_env_and_token(stack):
    assert stack.env["RUNCAST_DATABASE_URL"] == stack.database_url
    assert stack.env["RUNCAST_REDIS_URL"].startswith("redis://127.0.0.1:")
    token = stack.token("infra")
    assert token.startswith("rc_")
    with psycopg.connect(stack.database_url.replace("+psycopg", "")) as conn:
        assert conn.execute("SELECT name FROM projects").fetchall() == [("infra",)]


def test_embedded_healthz_on_an_empty_data_dir(embedded_env, monkeypatch):
    from fastapi.testclient import TestClient
    from runcast_server.app import create_app
    from runcast_server.core.settings import Settings

    empty = embedded_env.parent / "empty"  # not the fixture's copy of a database at head
    monkeypatch.setenv("RUNCAST_DATA_DIR", str(empty))
    with TestClient(create_app(Settings())) as client:
        r = client.get("/healthz")
    assert r.status_code == 200
    assert r.json()["mode"] == "embedded"
    assert (empty / "runcast.db").exists()
    assert "RUNCAST_REDIS_URL" not in os.environ
