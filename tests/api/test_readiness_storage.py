"""/readyz answers whether ingest can store (issue 23): the embedded database's disk below
RUNCAST_MIN_FREE_BYTES (ingest's own threshold and check, core/disk.py), a database that takes
no writes, and SQLite's write lock held too long are each a 503 naming the check, never a path.

A full disk is simulated where the server measures it (``core.disk.free_bytes``), so that the
same check decides for ingest and for /readyz; the read-only database by the connection's own
setting (SQLite ``PRAGMA query_only``, PostgreSQL ``default_transaction_read_only``).
"""

from __future__ import annotations

import sqlite3
import time
from typing import Any

import pytest
from runcast.wire import events as ev
from sqlalchemy import event

from alerts.helpers import WireRun


def _post(client: Any, token: str, run: WireRun) -> Any:
    return client.post("/api/v1/ingest", content=ev.dumps_batch([run.started(), run.metrics(0, loss=1.0)]),
                       headers={"Authorization": f"Bearer {token}", "Content-Type": "application/json"})


def test_a_full_disk_makes_readyz_and_ingest_503_until_space_returns(client, seed, embedded_env, monkeypatch):
    from runcast_server.core import disk

    token, settings = seed.token("demo"), client.app.state.context.settings
    ready = client.get("/readyz")
    assert ready.status_code == 200
    assert ready.json()["checks"] == {"database": {"ok": True, "error": None}, "disk": {"ok": True, "error": None}}

    monkeypatch.setattr(disk, "free_bytes", lambda _: settings.min_free_bytes - 1)  # the disk is full
    res = client.get("/readyz")
    assert res.status_code == 503 and int(res.headers["retry-after"]) > 0
    assert res.json() == {"status": "unavailable", "mode": "embedded",
                          "checks": {"database": {"ok": True, "error": None}, "disk": {"ok": False, "error": "DiskFull"}}}
    refused = WireRun(name="refused")
    res = _post(client, token, refused)
    assert res.status_code == 503 and int(res.headers["retry-after"]) > 0
    assert res.json() == {"error": {"message": "the server's disk is full; retry later"}}
    assert client.get(f"/api/v1/runs/{refused.run}").status_code == 404  # nothing was written
    for answer in (client.get("/readyz"), _post(client, token, refused)):
        assert str(embedded_env) not in answer.text and "runcast.db" not in answer.text

    monkeypatch.undo()  # space returns
    assert client.get("/readyz").status_code == 200
    assert _post(client, token, refused).status_code == 202
    assert client.get(f"/api/v1/runs/{refused.run}").status_code == 200


def test_zero_turns_the_disk_threshold_off(embedded_env, monkeypatch):
    from fastapi.testclient import TestClient
    from runcast_server.app import create_app
    from runcast_server.core import disk

    monkeypatch.setenv("RUNCAST_MIN_FREE_BYTES", "0")
    monkeypatch.setattr(disk, "free_bytes", lambda _: 0)
    with TestClient(create_app()) as client:
        assert client.get("/readyz").json()["checks"]["disk"] == {"ok": True, "error": None}


def test_sqlite_write_lock_held_past_the_timeout_is_not_ready_then_is(client):
    """The probe waits 2 s for the write lock (not the 30 s writers wait), and gives its
    pooled connection its writers' busy timeout back."""
    engine = client.app.state.context.database.engine
    holder = sqlite3.connect(engine.url.database, timeout=1)
    holder.execute("BEGIN IMMEDIATE")
    try:
        began = time.monotonic()
        res = client.get("/readyz")
        assert 1.5 < time.monotonic() - began < 10
        assert res.status_code == 503 and res.json()["checks"]["database"] == {"ok": False, "error": "OperationalError"}
    finally:
        holder.rollback()
        holder.close()
    assert client.get("/readyz").status_code == 200
    with engine.connect() as conn:
        assert conn.exec_driver_sql("PRAGMA busy_timeout").scalar() == 30_000


def test_a_read_only_database_is_not_ready(engine):
    """On SQLite and PostgreSQL: the probe's write is refused, and says so by its kind."""
    from runcast_server.core.db import DatabaseReadOnly, check_writable
    from runcast_server.core.settings import Settings
    from runcast_server.health import Probes

    check_writable(engine, 2.0)  # writable: nothing raised, nothing written

    @event.listens_for(engine, "connect")
    def _read_only(dbapi_conn: Any, _record: Any) -> None:
        cur = dbapi_conn.cursor()
        cur.execute("PRAGMA query_only=ON" if engine.dialect.name == "sqlite" else "SET default_transaction_read_only = on")
        cur.close()
        if engine.dialect.name != "sqlite":
            dbapi_conn.commit()

    engine.dispose()  # new connections: read-only ones
    with pytest.raises(DatabaseReadOnly):
        check_writable(engine, 2.0)
    report = Probes(engine=engine, settings=Settings(database_url=str(engine.url.render_as_string(False))),
                    redis=None).readiness()
    assert report.status == "unavailable" and report.checks["database"].error == "DatabaseReadOnly"
