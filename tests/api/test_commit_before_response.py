"""A write's response is sent only after its transaction committed: a client that reads again at
once (another connection, another process) sees what the 2xx acknowledged. CI caught the opposite
under load: ``PATCH /runs/{id}`` answered 200, and the next ``GET`` still held the old notes,
because FastAPI runs a ``yield`` dependency's exit code, the commit, after sending the response
unless the dependency is declared with ``scope="function"``."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable
from typing import Any

from sqlalchemy import text


def _drive(app: Any, method: str, path: str, body: dict[str, Any], token: str, seen: Callable[[], Any]) -> Any:
    """Call the ASGI app once; return what ``seen()`` (another connection's read) found when the
    response's status line was sent."""
    found: list[Any] = []
    payload = json.dumps(body).encode()
    scope = {
        "type": "http", "asgi": {"version": "3.0"}, "http_version": "1.1", "method": method,
        "scheme": "http", "path": path, "raw_path": path.encode(), "root_path": "", "query_string": b"",
        "headers": [(b"host", b"testserver"), (b"content-type", b"application/json"),
                    (b"content-length", str(len(payload)).encode()),
                    (b"authorization", f"Bearer {token}".encode())],
        "client": ("127.0.0.1", 5000), "server": ("testserver", 80),
    }
    sent = False

    async def receive() -> dict[str, Any]:
        nonlocal sent
        if sent:
            await asyncio.sleep(3600)
        sent = True
        return {"type": "http.request", "body": payload, "more_body": False}

    async def send(message: dict[str, Any]) -> None:
        if message["type"] == "http.response.start":
            assert message["status"] == 200
            found.append(seen())

    asyncio.run(app(scope, receive, send))
    return found[0]


def test_a_patch_commits_before_its_200_is_sent(client: Any, db: Any, seed: Any) -> None:
    run = seed.run("alpha", name="before").start()

    def notes() -> Any:
        with db.engine.connect() as conn:
            return conn.execute(text("SELECT notes FROM runs WHERE id = :id"), {"id": run.run}).scalar()

    seen = _drive(client.app, "PATCH", f"/api/v1/runs/{run.run}", {"notes": "read me back"}, seed.token("alpha"), notes)
    assert seen == "read me back"
