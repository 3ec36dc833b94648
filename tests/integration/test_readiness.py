"""`/healthz` is liveness, `/readyz` reports the database and Redis; with either down the API
answers JSON 503 with Retry-After (never a plain-text 500), and recovers by itself.

Each test runs its own PostgreSQL or Redis (the session's servers are shared), stops it
under a running `runcast serve` in production mode, and starts it again.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from runcast.wire import events as ev
from services import PostgresServer, RedisServer

pytestmark = pytest.mark.services


@pytest.fixture
def own_pg() -> Iterator[tuple[PostgresServer, str]]:
    from runcast_server.core import migrate

    server = PostgresServer().start()
    try:
        name = server.create_database()
        migrate.upgrade(server.url(name))
        yield server, server.url(name)
    finally:
        server.stop()


@pytest.fixture
def own_redis() -> Iterator[RedisServer]:
    server = RedisServer().start()
    try:
        yield server
    finally:
        server.stop()


def _token(database_url: str, project: str = "ready") -> str:
    from runcast_server.core.auth import create_token
    from runcast_server.core.db import make_engine
    from sqlalchemy.orm import Session

    engine = make_engine(database_url)
    try:
        with Session(engine) as session:
            token = create_token(session, project)
            session.commit()
        return token
    finally:
        engine.dispose()


def _batch(run: str) -> dict[str, Any]:
    seg = ev.new_id()
    return {"v": 1, "events": [
        {"v": 1, "type": "run_started", "run": run, "segment": seg, "seq": 0, "ts": 1.0, "project": "ready", "name": "r"},
        {"v": 1, "type": "metrics", "run": run, "segment": seg, "seq": 1, "ts": 1.0, "step": 1, "values": {"a": 1.0}},
    ]}


def _assert_unavailable(res: httpx.Response) -> None:
    assert res.status_code == 503, res.text
    assert res.headers["content-type"].startswith("application/json")
    assert int(res.headers["retry-after"]) > 0
    assert "unavailable" in res.json()["error"]["message"]


def test_postgres_down_is_503_and_readyz_says_so(processes, own_pg, own_redis, wait_for):
    pg, url = own_pg
    token = _token(url)
    processes.start_api(RUNCAST_DATABASE_URL=url, RUNCAST_REDIS_URL=own_redis.url(),
                        RUNCAST_DATA_DIR=str(processes.tmp / "data"))
    api, auth = processes.api_url, {"Authorization": f"Bearer {token}"}
    ready = httpx.get(f"{api}/readyz", timeout=30)
    assert ready.status_code == 200
    assert ready.json() == {"status": "ready", "mode": "production",
                            "checks": {"database": {"ok": True, "error": None}, "redis": {"ok": True, "error": None}}}
    assert httpx.post(f"{api}/api/v1/ingest", json=_batch("readyrun0001"), headers=auth, timeout=30).status_code == 202

    pg.pause()
    try:
        res = httpx.get(f"{api}/readyz", timeout=30)
        assert res.status_code == 503 and int(res.headers["retry-after"]) > 0
        body = res.json()
        assert body["status"] == "unavailable" and body["checks"]["database"]["ok"] is False
        assert body["checks"]["redis"] == {"ok": True, "error": None}
        assert str(pg.port) not in res.text  # the failure's kind, never the address
        assert httpx.get(f"{api}/healthz", timeout=30).status_code == 200  # liveness: the process answers
        for method, path, kwargs in [
            ("GET", "/api/v1/runs", {}),
            ("GET", "/api/v1/runs/readyrun0001", {}),
            ("GET", "/api/v1/runs/readyrun0001/metrics", {"params": {"key": "a"}}),
            ("GET", "/api/v1/runs/readyrun0001/events", {"headers": auth}),
            ("POST", "/api/v1/ingest", {"json": _batch("readyrun0002"), "headers": auth}),
        ]:
            _assert_unavailable(httpx.request(method, f"{api}{path}", timeout=30, **kwargs))
    finally:
        pg.resume()
    wait_for(lambda: httpx.get(f"{api}/readyz", timeout=30).status_code == 200, 30, "readyz after PostgreSQL is back")
    assert httpx.get(f"{api}/api/v1/runs/readyrun0001", timeout=30).status_code == 200
    processes.processes[0].check_alive("after the outage")


def test_redis_down_is_503_and_readyz_says_so(processes, pg_url, own_redis, wait_for):
    token = _token(pg_url)
    processes.start_api(RUNCAST_DATABASE_URL=pg_url, RUNCAST_REDIS_URL=own_redis.url(),
                        RUNCAST_DATA_DIR=str(processes.tmp / "data"))
    api, auth = processes.api_url, {"Authorization": f"Bearer {token}"}
    assert httpx.post(f"{api}/api/v1/ingest", json=_batch("readyrun0003"), headers=auth, timeout=30).status_code == 202
    assert httpx.get(f"{api}/readyz", timeout=30).status_code == 200

    own_redis.pause()
    try:
        res = httpx.get(f"{api}/readyz", timeout=30)
        assert res.status_code == 503 and int(res.headers["retry-after"]) > 0
        assert res.json()["checks"] == {"database": {"ok": True, "error": None},
                                        "redis": {"ok": False, "error": res.json()["checks"]["redis"]["error"]}}
        # Reads come from the database: they go on.
        assert httpx.get(f"{api}/api/v1/runs/readyrun0003", timeout=30).status_code == 200
        # Ingest needs the queue: 503 with Retry-After, unless the batch is kept durably without it.
        res = httpx.post(f"{api}/api/v1/ingest", json=_batch("readyrun0004"), headers=auth, timeout=60)
        if res.status_code != 202:
            _assert_unavailable(res)
        json.dumps(res.json())
    finally:
        own_redis.resume()
    wait_for(lambda: httpx.get(f"{api}/readyz", timeout=30).status_code == 200, 30, "readyz after Redis is back")
    processes.processes[0].check_alive("after the outage")


def test_a_read_only_database_is_503_and_readyz_says_so(processes, pg_url, own_redis, wait_for):
    """PostgreSQL taking no writes (a standby, or default_transaction_read_only as managed
    services set it when their disk fills): /readyz 503 with the check's kind, ingest a JSON
    503 (not a 500), reads go on; ready again once it takes writes."""
    from sqlalchemy import create_engine, text

    token = _token(pg_url)
    processes.start_api(RUNCAST_DATABASE_URL=pg_url, RUNCAST_REDIS_URL=own_redis.url(),
                        RUNCAST_DATA_DIR=str(processes.tmp / "data"))
    api, auth = processes.api_url, {"Authorization": f"Bearer {token}"}
    ready = httpx.get(f"{api}/readyz", timeout=30)
    assert ready.status_code == 200 and set(ready.json()["checks"]) == {"database", "redis"}  # no local disk
    assert httpx.post(f"{api}/api/v1/ingest", json=_batch("readyrun0005"), headers=auth, timeout=30).status_code == 202

    admin = create_engine(pg_url, isolation_level="AUTOCOMMIT")

    def read_only(on: bool) -> None:  # for new sessions; the API's are ended, its pool reconnects
        with admin.connect() as conn:
            name = conn.execute(text("SELECT current_database()")).scalar_one()
            setting = "SET default_transaction_read_only = on" if on else "RESET default_transaction_read_only"
            conn.execute(text(f'ALTER DATABASE "{name}" {setting}'))
            conn.execute(text("SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
                              "WHERE datname = current_database() AND pid <> pg_backend_pid()"))

    try:
        read_only(True)
        res = wait_for(lambda: (r := httpx.get(f"{api}/readyz", timeout=30)).status_code == 503 and r, 30,
                       "readyz to see the read-only database")
        assert int(res.headers["retry-after"]) > 0
        assert res.json()["checks"] == {"database": {"ok": False, "error": "DatabaseReadOnly"},
                                        "redis": {"ok": True, "error": None}}
        _assert_unavailable(httpx.post(f"{api}/api/v1/ingest", json=_batch("readyrun0006"), headers=auth, timeout=30))
        assert httpx.get(f"{api}/api/v1/runs/readyrun0005", timeout=30).status_code == 200  # reads go on
    finally:
        read_only(False)
        admin.dispose()
    wait_for(lambda: httpx.get(f"{api}/readyz", timeout=30).status_code == 200, 30, "readyz once the database takes writes")
    assert httpx.post(f"{api}/api/v1/ingest", json=_batch("readyrun0006"), headers=auth, timeout=30).status_code == 202
    processes.processes[0].check_alive("after the read-only spell")
