"""Bounded everything: a 50 MB body on every route of a real `runcast serve` is refused with a
JSON 413 before it is read, whether it declares its length or comes chunked, and the API
process's memory stays where it was (one such POST used to grow it from 149 to 752 MiB).

The routes are those of the app itself (``iter_route_contexts``), so a new route is covered.
"""

from __future__ import annotations

import json
import select
import socket
from typing import Any

import pytest
from fastapi.routing import iter_route_contexts

pytestmark = pytest.mark.slow

BODY_MB = 50
CHUNK = b"x" * (1 << 20)


def _routes() -> list[tuple[str, str]]:
    from runcast_server.app import create_app

    out = []
    for route in iter_route_contexts(create_app().routes):
        for method in sorted(route.methods or ()):
            path = (route.path_format.replace("{run_id}", "bodyrun00000001").replace("{cid}", "1")
                    .replace("{rid}", "1").replace("{subscription_id}", "1").replace("{version}", "v1")
                    .replace("{project}", "demo"))
            out.append((method, path))
    return out


def _send(port: int, method: str, path: str, *, chunked: bool) -> tuple[int | None, dict[str, str], bytes]:
    """Send a 50 MB body, stopping as soon as the server answers; return status, headers, body.

    A server that answers before reading the body closes a connection with unread bytes, and
    the kernel may then reset it before the answer is read: status None (the in-process tests
    check those answers byte for byte; this test is about memory).
    """
    sock = socket.create_connection(("127.0.0.1", port), timeout=60)
    raw = b""
    try:
        length = "Transfer-Encoding: chunked" if chunked else f"Content-Length: {BODY_MB << 20}"
        sock.sendall(f"{method} {path} HTTP/1.1\r\nHost: t\r\nContent-Type: application/json\r\n{length}\r\n"
                     "Connection: close\r\n\r\n".encode())
        frame = (b"%x\r\n" % len(CHUNK)) + CHUNK + b"\r\n" if chunked else CHUNK
        pending = memoryview(frame * BODY_MB + (b"0\r\n\r\n" if chunked else b""))
        try:
            # Never block on sending: a server that answers without reading stops reading, and
            # a blocked send would never read its (possibly large) answer.
            while pending:
                readable, writable, _ = select.select([sock], [sock], [], 10)
                if readable:
                    break  # the server has answered: stop sending
                if writable:
                    pending = pending[sock.send(pending[: 1 << 16]):]
            while b"\r\n\r\n" not in raw or len(raw) < raw.index(b"\r\n\r\n") + 4 + _length(raw):
                piece = sock.recv(65536)
                if not piece:
                    break
                raw += piece
        except (BrokenPipeError, ConnectionResetError):
            if b"\r\n\r\n" not in raw:
                return None, {}, b""
    finally:
        sock.close()
    head, _, body = raw.partition(b"\r\n\r\n")
    lines = head.decode("latin-1").split("\r\n")
    headers = {k.lower(): v.strip() for k, _, v in (line.partition(":") for line in lines[1:])}
    return int(lines[0].split()[1]), headers, body


def _length(raw: bytes) -> int:
    head = raw.split(b"\r\n\r\n", 1)[0].decode("latin-1").lower()
    for line in head.split("\r\n"):
        if line.startswith("content-length:"):
            return int(line.split(":", 1)[1])
    return 0


def _rss_mib(pid: int) -> float:
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    raise AssertionError("no VmRSS")


def test_50_mb_bodies_on_every_route_are_413_json_and_memory_stays_bounded(processes):
    processes.env = {"RUNCAST_DATA_DIR": str(processes.tmp / "data")}
    proc = processes.start_api()
    port = int(processes.api_url.rsplit(":", 1)[1])
    routes = _routes()
    assert len(routes) >= 30
    _send(port, "GET", "/healthz", chunked=False)  # warm up
    before = _rss_mib(proc.pid)
    seen: dict[str, Any] = {}
    for method, path in routes:
        status, headers, body = _send(port, method, path, chunked=False)
        assert status == 413, (method, path, status, body[:200])
        assert headers["content-type"].startswith("application/json")
        if method != "HEAD":  # a HEAD answer has no body
            assert json.loads(body)["error"]["field"] == "body"
        # Chunked: a route that reads its body stops at its limit (413); one that does not
        # read it answers as usual; either way, never a 5xx and never the whole body held.
        status, headers, body = _send(port, method, path, chunked=True)
        assert status is None or status < 500, (method, path, status, body[:200])
        if status == 413 and method != "HEAD":
            assert json.loads(body)["error"]["field"] == "body"
        seen[f"{method} {path}"] = status
    growth = _rss_mib(proc.pid) - before
    proc.check_alive("after the bodies")
    for reads_its_body in ("POST /api/v1/subscriptions", "PUT /api/v1/runs/bodyrun00000001/alerts/config"):
        assert seen[reads_its_body] in (413, None), seen
    # 2 x 50 MB per route were sent at it; it keeps at most a limit (8 MiB for ingest) at a time.
    assert growth < 40, f"API RSS grew by {growth:.0f} MiB ({before:.0f} MiB before)"
