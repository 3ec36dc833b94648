"""An old server (before run renames) refuses an ``update`` carrying only name/tags/notes/group
with 422, naming that event: its schema wanted config, summary or define. The SDK must still
store every point of the batch that carried it (live and through ``runcast sync``) and say once
that the server does not take renames. The old server is a real HTTP server in the test."""

from __future__ import annotations

import json
import logging
import subprocess
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest
import services

import runcast

FOLDED = ("config", "summary", "define")


class OldServer(ThreadingHTTPServer):
    def __init__(self) -> None:
        super().__init__(("127.0.0.1", 0), OldHandler)
        self.stored: list[dict[str, Any]] = []
        self.refusals = 0
        self.url = f"http://127.0.0.1:{self.server_address[1]}"


class OldHandler(BaseHTTPRequestHandler):
    server: OldServer

    def log_message(self, *args: Any) -> None:
        pass

    def _answer(self, status: int, doc: dict[str, Any]) -> None:
        body = json.dumps(doc).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def do_GET(self) -> None:  # noqa: N802
        if self.path.startswith("/api/v1/whoami"):
            return self._answer(200, {"project": "old", "run": None, "max_batch_events": 1000})
        self._answer(404, {"error": {"message": "not found"}})

    def do_POST(self) -> None:  # noqa: N802
        batch = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        for index, e in enumerate(batch["events"]):  # the old schema: the whole batch is refused
            if e["type"] == "update" and not any(e.get(k) is not None for k in FOLDED):
                self.server.refusals += 1
                return self._answer(422, {"error": {"message": "an update needs config, summary or define",
                                                    "field": "config", "index": index}})
        self.server.stored.extend(batch["events"])
        self._answer(202, {"accepted": len(batch["events"])})


@pytest.fixture()
def old_server() -> Iterator[OldServer]:
    server = OldServer()
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield server
    server.shutdown()
    server.server_close()


def steps(server: OldServer, key: str = "loss") -> list[int]:
    return sorted(e["step"] for e in server.stored if e["type"] == "metrics" and key in e["values"])


def test_renames_to_an_old_server_lose_no_point(old_server, tmp_path, caplog):
    run = runcast.init(project="old", name="first", server=old_server.url, token="t", dir=tmp_path / "spool",
                       flush_interval=60, config={"lr": 1.0})
    with caplog.at_level(logging.WARNING, logger="runcast"):
        for step in range(50):
            run.log({"loss": 1.0 / (step + 1)}, step=step)
        run.name = "renamed"  # in the same batch as the points around it
        run.tags = ["a", "b"]
        run.config.update({"lr": 0.5}, allow_val_change=True)
        for step in range(50, 100):
            run.log({"loss": 1.0 / (step + 1)}, step=step)
        assert run.flush(timeout=20)
        run.notes = "later"  # known refused now: left out before it is sent
        run.group = "g"
        run.log({"loss": 0.0}, step=100)
        run.finish()
    assert steps(old_server) == list(range(101))
    updates = [e for e in old_server.stored if e["type"] == "update"]
    assert [u.get("config") for u in updates if "config" in u] == [{"lr": 0.5}]
    assert not [u for u in updates if {"name", "tags", "notes", "group"} & u.keys()]
    assert old_server.refusals == 1
    warned = [r.getMessage() for r in caplog.records if "renames" in r.getMessage()]
    assert len(warned) == 1 and old_server.url in warned[0]
    assert not [r for r in caplog.records if r.levelno >= logging.ERROR]  # nothing reported as dropped


def test_renames_synced_to_an_old_server_lose_no_point(old_server, tmp_path):
    run = runcast.init(project="old", name="offline", mode="offline", dir=tmp_path / "spool")
    for step in range(30):
        run.log({"loss": 1.0}, step=step)
        if step in (10, 20):
            run.name = f"renamed-{step}"
    run.finish()
    res = subprocess.run([str(services.BIN / "runcast"), "sync", str(tmp_path / "spool"), "--server", old_server.url,
                          "--token", "t"], env=services.child_env({}), capture_output=True, text=True, timeout=120)
    assert res.returncode == 0, res.stdout + res.stderr
    assert steps(old_server) == list(range(30))
    out = res.stdout + res.stderr
    assert out.count("does not take run renames") == 1, out
