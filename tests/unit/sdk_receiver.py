"""A real, tiny ingest endpoint for the SDK tests: records batches, can fail on demand."""

from __future__ import annotations

import hashlib
import json
import re
import socket
import threading
import time
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest


_BLOB_PATH = re.compile(r"^/api/v1/runs/([^/]+)/blobs/([0-9a-f]{64})$")


class _Server(ThreadingHTTPServer):
    daemon_threads = True

    def handle_error(self, request: Any, client_address: Any) -> None:
        pass  # a client that timed out and hung up is part of the tests


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


class Receiver:
    """``POST /api/v1/ingest`` on 127.0.0.1.

    ``mode``: "ok" (202), "fail" (503), "reject" (422 with an error body),
    "unauthorized" (401), "slow"
    (sleeps ``delay`` seconds, then 202). ``stop()`` closes the port, so connections
    are refused until ``start()`` binds it again. A batch of more than ``max_events``
    events gets the server's 422 on ``events``. ``whoami``: the body of ``GET
    /api/v1/whoami`` (None: no such route, as an older server). ``PUT`` spool reports
    (``/api/v1/runs/{run}/segments/{segment}/spool``) are kept in ``spool_reports``.

    Images: ``HEAD``/``PUT /api/v1/runs/{run}/blobs/{sha256}`` keep them in ``blobs`` (sha256 ->
    (bytes, content type); a body whose sha256 differs is a 422); ``blob_mode`` "ok", "fail"
    (503) or "reject" (422); every blob request is kept in ``blob_requests`` ((method, sha256)).
    A batch holding a media image event whose blob is not held is refused (404 naming ``blob``),
    as the server refuses it.
    """

    def __init__(self, port: int | None = None) -> None:
        self.port = port or free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.mode = "ok"
        self.delay = 0.0
        self.bodies: list[dict[str, Any]] = []  # accepted batches, in arrival order
        self.requests = 0
        self.auth: list[str | None] = []
        self.max_events = 5000
        self.max_bytes: int | None = None  # a body larger than this gets 413 (as RUNCAST_MAX_BODY_BYTES)
        self.whoami: dict[str, Any] | None = None
        self.spool_reports: list[tuple[str, dict[str, Any]]] = []  # (path, body)
        self.blobs: dict[str, tuple[bytes, str]] = {}
        self.blob_mode = "ok"
        self.blob_requests: list[tuple[str, str]] = []
        self._lock = threading.Lock()
        self._server: ThreadingHTTPServer | None = None

    def start(self) -> Receiver:
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:  # http.server's naming
                if receiver.whoami is None or not self.path.startswith("/api/v1/whoami"):
                    return self._reply(404, {"error": {"message": "not found"}})
                self._reply(200, receiver.whoami)

            def do_HEAD(self) -> None:  # no body
                found = _BLOB_PATH.match(self.path)
                if found is not None:
                    with receiver._lock:
                        receiver.blob_requests.append(("HEAD", found.group(2)))
                status = 404 if found is None else 503 if receiver.blob_mode == "fail" else \
                    200 if found.group(2) in receiver.blobs else 404
                self.send_response(status)
                self.send_header("Content-Length", "0")
                self.end_headers()

            def do_PUT(self) -> None:
                body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
                if (found := _BLOB_PATH.match(self.path)) is not None:
                    return self._blob(found.group(2), body)
                if not self.path.endswith("/spool"):
                    return self._reply(404, {"error": {"message": "not found"}})
                with receiver._lock:
                    receiver.spool_reports.append((self.path, json.loads(body)))
                self._reply(200, {"ok": True})

            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
                with receiver._lock:
                    receiver.requests += 1
                    receiver.auth.append(self.headers.get("Authorization"))
                mode = receiver.mode
                if self.path != "/api/v1/ingest":
                    return self._reply(404, {"error": {"message": "not found"}})
                if receiver.max_bytes is not None and len(body) > receiver.max_bytes:
                    return self._reply(413, {"error": {"message": "request body too large"}})
                if mode == "fail":
                    return self._reply(503, {"error": {"message": "down for maintenance"}})
                if mode == "unauthorized":
                    return self._reply(401, {"error": {"message": "unknown token"}})
                if mode == "reject":
                    return self._reply(422, {"error": {"message": "bad event", "index": 0, "field": "values"}})
                if mode == "slow":
                    time.sleep(receiver.delay)
                batch = json.loads(body)  # strict: NaN must arrive as a string
                for index, event in enumerate(batch["events"]):
                    if event["type"] == "media" and event.get("blob") and event["blob"] not in receiver.blobs:
                        error = {"message": "blob not found", "field": "blob", "index": index}
                        return self._reply(404, {"error": error})
                if len(batch["events"]) > receiver.max_events:
                    message = f"holds {len(batch['events'])} events, more than {receiver.max_events}"
                    return self._reply(422, {"error": {"message": message, "field": "events"}})
                with receiver._lock:
                    receiver.bodies.append(batch)
                self._reply(202, {"accepted": len(batch["events"])})

            def _blob(self, sha256: str, body: bytes) -> None:
                with receiver._lock:
                    receiver.blob_requests.append(("PUT", sha256))
                if receiver.blob_mode == "fail":
                    return self._reply(503, {"error": {"message": "down for maintenance"}})
                if receiver.blob_mode == "reject":
                    return self._reply(422, {"error": {"message": "too many pixels", "field": "body"}})
                if hashlib.sha256(body).hexdigest() != sha256:
                    return self._reply(422, {"error": {"message": "sha256 mismatch", "field": "sha256"}})
                with receiver._lock:
                    known = sha256 in receiver.blobs
                    receiver.blobs[sha256] = (body, self.headers.get("Content-Type", ""))
                self._reply(200 if known else 201, {"sha256": sha256})

            def _reply(self, status: int, doc: dict[str, Any]) -> None:
                data = json.dumps(doc).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, *args: Any) -> None:
                pass

        self._server = _Server(("127.0.0.1", self.port), Handler)
        threading.Thread(target=self._server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True).start()
        return self

    def stop(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None

    def events(self) -> list[dict[str, Any]]:
        """Every event received once, deduplicated by (segment, seq) as the service does, in arrival order."""
        seen: set[tuple[str, int]] = set()
        out = []
        with self._lock:
            bodies = list(self.bodies)
        for body in bodies:
            for event in body["events"]:
                key = (event["segment"], event["seq"])
                if key not in seen:
                    seen.add(key)
                    out.append(event)
        return out

    def of_type(self, kind: str) -> list[dict[str, Any]]:
        return [e for e in self.events() if e["type"] == kind]

    def wait_for(self, predicate: Callable[[], bool], timeout: float = 10.0) -> None:
        deadline = time.monotonic() + timeout
        while not predicate():
            if time.monotonic() > deadline:
                raise AssertionError("timed out waiting for the receiver")
            time.sleep(0.01)


# --- pytest fixtures (import them into a test module to use them) ----------------------


@pytest.fixture
def receiver() -> Any:
    r = Receiver().start()
    yield r
    r.stop()


@pytest.fixture
def make_run(receiver: Receiver, tmp_path: Any, monkeypatch: pytest.MonkeyPatch) -> Any:
    """``make_run(**init_kwargs)``: a run sending to ``receiver`` with fast timers; finished at teardown."""
    import runcast

    for name in ("RUNCAST_SERVER", "RUNCAST_TOKEN", "RUNCAST_CHECKPOINT_DIR", "RANK", "WORLD_SIZE"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("RUNCAST_SPOOL_DIR", str(tmp_path / "spool"))
    runs = []

    def make(**kwargs: Any) -> Any:
        options = {
            "project": "sdk-tests",
            "name": "unit",
            "server": receiver.url,
            "token": "tok-123",
            "flush_interval": 0.05,
            "heartbeat_interval": 60.0,
            "retry_initial": 0.02,
            "retry_max": 0.1,
            "finish_timeout": 5.0,
            "capture_code": False,
        }
        options.update(kwargs)
        run = runcast.init(reinit="create_new", **options)  # a test may hold several runs open at once
        runs.append(run)
        return run

    yield make
    for run in runs:
        run.finish(timeout=1.0)
