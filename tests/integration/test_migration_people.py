"""Migration 0021 (people, roles, token scopes) on SQLite and PostgreSQL: a token made before it
keeps all three scopes (it can do what it did); the downgrade drops the new tables and column
and keeps the tokens."""

from __future__ import annotations

import pytest
from alembic import command
from runcast_server.core import migrate
from runcast_server.core.db import make_engine
from sqlalchemy import inspect, text

NEW_TABLES = {"users", "identities", "memberships", "user_sessions"}


@pytest.fixture(params=["sqlite", "postgresql"])
def url(request, tmp_path):
    if request.param == "sqlite":
        yield f"sqlite:///{tmp_path / 'm.db'}"
        return
    pg = request.getfixturevalue("pg_server")
    name = pg.create_database()
    try:
        yield pg.url(name)
    finally:
        pg.drop_database(name)


def test_0020_gives_old_tokens_every_scope_and_downgrades(url):
    config = migrate.alembic_config(url)
    command.upgrade(config, "0019")
    engine = make_engine(url)
    try:
        with engine.begin() as conn:
            conn.execute(text("INSERT INTO projects (id, name, created_at) VALUES (1, 'p', 0)"))
            conn.execute(text("INSERT INTO ingest_tokens (id, project_id, token_hash, prefix, created_at) "
                              "VALUES (7, 1, :h, 'rc_x', 0)"), {"h": "a" * 64})
        command.upgrade(config, "0021")
        with engine.connect() as conn:
            assert conn.execute(text("SELECT scopes FROM ingest_tokens WHERE id = 7")).scalar_one() == \
                "read,ingest,team"
        assert set(inspect(engine).get_table_names()) >= NEW_TABLES
        command.downgrade(config, "0019")
        engine.dispose()
        assert not NEW_TABLES & set(inspect(engine).get_table_names())
        assert "scopes" not in {c["name"] for c in inspect(engine).get_columns("ingest_tokens")}
        with engine.connect() as conn:
            assert conn.execute(text("SELECT token_hash FROM ingest_tokens WHERE id = 7")).scalar_one() == "a" * 64
    finally:
        engine.dispose()
