"""Migration 0019: runs.config_jsonb, summary_jsonb and last_values_jsonb follow their columns
(jsonb on PostgreSQL), keep every run and the config's key order; its downgrade drops just them."""

from __future__ import annotations

import json

import pytest
from alembic import command
from runcast_server.core import migrate
from runcast_server.core.db import make_engine
from sqlalchemy import inspect, text

CONFIG = {"zeta": 1, "lr": 0.00030000000000000003, "model": {"layers": 8, "ünï": "x"}, "flag": True, "none": None}
COPIES = {"config_jsonb", "summary_jsonb", "last_values_jsonb"}


@pytest.fixture(params=["sqlite", "postgresql"])
def url(request, tmp_path):
    if request.param == "sqlite":
        yield f"sqlite:///{tmp_path / 'j.db'}"
        return
    pg = request.getfixturevalue("pg_server")
    name = pg.create_database()
    try:
        yield pg.url(name)
    finally:
        pg.drop_database(name)


def _columns(engine) -> set[str]:
    return {c["name"] for c in inspect(engine).get_columns("runs")}


def _copies(conn) -> dict[str, object]:
    row = conn.execute(text("SELECT config_jsonb, summary_jsonb, last_values_jsonb FROM runs WHERE id = 'r1'")).one()
    return {k: json.loads(v) if isinstance(v, str) else v for k, v in zip(("config", "summary", "last"), row)}


def test_upgrade_fills_the_copies_and_downgrade_drops_them(url):
    migrate.upgrade(url, "0018")
    engine = make_engine(url)
    try:
        with engine.begin() as conn:
            conn.execute(text("INSERT INTO projects (id, name, created_at) VALUES (1, 'p', 0)"))
            conn.execute(text(
                "INSERT INTO runs (id, project_id, name, visibility, status, config, code, env, created_at,"
                " last_values, version, summary) VALUES ('r1', 1, 'n', 'public', 'running', :c, '{}', '{}', 0,"
                " :l, 1, NULL)"), {"c": json.dumps(CONFIG), "l": json.dumps({"loss": [3, 2.5]})})
        engine.dispose()
        migrate.upgrade(url)
        assert _columns(engine) >= COPIES
        with engine.begin() as conn:
            assert _copies(conn) == {"config": CONFIG, "summary": None, "last": {"loss": [3, 2.5]}}
            conn.execute(text("UPDATE runs SET summary = :s, last_values = :l"),
                         {"s": json.dumps({"acc": 0.5}), "l": json.dumps({"loss": [4, 2.0]})})
            assert _copies(conn) == {"config": CONFIG, "summary": {"acc": 0.5}, "last": {"loss": [4, 2.0]}}
            stored = conn.execute(text("SELECT config FROM runs")).scalar()
        assert list(json.loads(stored) if isinstance(stored, str) else stored) == list(CONFIG)  # order kept
        engine.dispose()
        command.downgrade(migrate.alembic_config(url), "0018")
        assert not COPIES & _columns(engine)
        with engine.connect() as conn:
            config = conn.execute(text("SELECT config FROM runs WHERE id = 'r1'")).scalar()
        assert (json.loads(config) if isinstance(config, str) else config) == CONFIG
        engine.dispose()
        migrate.upgrade(url)
        assert _columns(engine) >= COPIES
    finally:
        engine.dispose()
