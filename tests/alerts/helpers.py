"""Helpers for the alert tests: wire runs posted to /api/v1/ingest, curves, a webhook receiver."""

from __future__ import annotations

import http.server
import json
import math
import random
import threading
import time
from typing import Any

from runcast.wire import events as ev


class WireRun:
    """One run as the SDK would send it, posted with ``post(client_or_url, token)``."""

    def __init__(self, project: str = "demo", name: str = "run", run_id: str | None = None) -> None:
        self.project, self.name = project, name
        self.run = run_id or ev.new_id()
        self.segment = self.run
        self.seq = 0

    def event(self, kind: str, **fields: Any) -> dict[str, Any]:
        e = {"v": 1, "type": kind, "run": self.run, "segment": self.segment, "seq": self.seq, "ts": time.time(), **fields}
        self.seq += 1
        return ev.encode_event(e)

    def started(self, **fields: Any) -> dict[str, Any]:
        return self.event("run_started", project=self.project, name=self.name, **fields)

    def resume(self, step: int, **fields: Any) -> dict[str, Any]:
        self.segment, self.seq = ev.new_id(), 0
        return self.started(resume_step=step, **fields)

    def metrics(self, step: int, **values: float) -> dict[str, Any]:
        return self.event("metrics", step=step, values=values)


def post(client: Any, token: str, events: list[dict[str, Any]]) -> None:
    r = client.post("/api/v1/ingest", content=ev.dumps_batch(events),
                    headers={"Authorization": f"Bearer {token}", "Content-Type": "application/json"})
    assert r.status_code == 202, r.text


def loss_curve(steps: int, seed: int = 0, spike: tuple[int, int, float] | None = None) -> list[float]:
    """Power-law decay with 1% noise; ``spike`` = (start, length, relative height)."""
    rng = random.Random(seed)
    out = []
    for t in range(steps):
        v = 2.0 + 8.0 * (t + 10) ** -0.5
        v *= 1 + rng.gauss(0, 0.01)
        if spike and spike[0] <= t < spike[0] + spike[1]:
            v *= 1 + spike[2]
        out.append(v)
    return out


class Receiver:
    """A webhook receiver on 127.0.0.1 (http.server in a thread); ``status`` is what it answers."""

    def __init__(self, status: int = 200) -> None:
        self.status = status
        self.requests: list[dict[str, Any]] = []
        self.arrived: list[float] = []
        outer = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
                outer.arrived.append(time.time())
                outer.requests.append({"path": self.path, "headers": dict(self.headers), "body": body})
                self.send_response(outer.status)
                self.send_header("Content-Length", "0")
                self.end_headers()

            def log_message(self, *args: Any) -> None:
                pass

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/hook"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()

    def json(self, i: int) -> Any:
        return json.loads(self.requests[i]["body"])


def wait(check: Any, timeout: float = 20, interval: float = 0.05) -> Any:
    deadline = time.time() + timeout
    while True:
        got = check()
        if got:
            return got
        if time.time() > deadline:
            raise AssertionError(f"timed out waiting for {check}")
        time.sleep(interval)


def finite(x: float) -> bool:
    return math.isfinite(x)
