"""Simulated public viewers of a run's cacheable broadcast (docs/live.md, "Following a run through
a cache"), for bench/broadcast_crowd.py: many per process, each an asyncio protocol on one
keep-alive HTTP/1.1 connection (no task per viewer, no HTTP library), so that one Python process
makes thousands of requests a second on a machine it shares with the servers.

Every viewer reads the edge once a second (``If-None-Match`` its last ETag), fetches the sealed
pieces it lacks, and applies the messages after what it holds in version order. Identical bodies
(a cached edge or piece is the same bytes for everyone) are parsed once per process and shared:
a browser parses its own copy, elsewhere, at no cost to the server.
"""

from __future__ import annotations

import asyncio
import dataclasses
import gc
import json
import random
import time
from dataclasses import dataclass, field
from typing import Any


@dataclass
class Tally:
    """What one viewer process saw, sent back to the bench."""

    requests: int = 0
    edges_200: int = 0
    edges_304: int = 0
    pieces: int = 0
    errors: int = 0
    bytes_in: int = 0
    edge_bytes: int = 0  # bodies of 200 edges
    piece_bytes: int = 0
    lags: list[float] = field(default_factory=list)  # poll started - poll due, s
    arrivals: list[tuple[float, int, int]] = field(default_factory=list)  # (time, lo, hi]: versions that arrived
    applied: list[int] = field(default_factory=list)  # messages applied, per viewer
    held: list[int] = field(default_factory=list)  # version held at the end, per viewer
    joined: list[int] = field(default_factory=list)  # version held on joining, per viewer
    message_versions: set[int] = field(default_factory=set)  # every version that had a message


class Viewer(asyncio.Protocol):
    """One viewer: a round is the edge, then the pieces it needs, one request at a time."""

    def __init__(self, crowd: Crowd, offset: float) -> None:
        self.crowd, self.tally = crowd, crowd.tally
        self.loop = asyncio.get_running_loop()
        self.transport: asyncio.Transport | None = None
        self.buf = b""
        self.etag = b""
        self.policy: str | None = None
        self.version = 0
        self.applied = 0
        self.joined = 0  # the version held on joining
        self.due = self.loop.time() + offset
        self.pending: list[int] = []  # pieces still to fetch this round
        self.edge: dict[str, Any] | None = None
        self.busy = False
        self.stopping = False
        self.connected: asyncio.Future[None] = self.loop.create_future()

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)
        self.transport = transport
        self.connected.set_result(None)

    def start(self) -> None:
        self.loop.call_at(self.due, self.poll)

    def poll(self) -> None:
        if self.stopping or self.transport is None:
            return
        self.tally.lags.append(self.loop.time() - self.due)
        self.busy = True
        extra = b"If-None-Match: " + self.etag + b"\r\n" if self.etag else b""
        self.send(self.crowd.edge_request[:-2] + extra + b"\r\n")

    def send(self, request: bytes) -> None:
        assert self.transport is not None
        self.tally.requests += 1
        self.transport.write(request)

    def data_received(self, data: bytes) -> None:
        self.tally.bytes_in += len(data)
        self.buf += data
        end = self.buf.find(b"\r\n\r\n")
        if end < 0:
            return
        raw = self.buf[:end] + b"\r\n"
        head = raw.lower()
        at = head.find(b"content-length: ")
        length = int(head[at + 16:head.index(b"\r\n", at)]) if at >= 0 else 0
        if len(self.buf) < end + 4 + length:
            return
        body, self.buf = self.buf[end + 4:end + 4 + length], self.buf[end + 4 + length:]
        self.answered(raw, head, body)

    def answered(self, raw: bytes, head: bytes, body: bytes) -> None:
        status = head[9:12]
        if self.edge is None and not self.pending:  # the edge's answer
            if status == b"304":
                self.tally.edges_304 += 1
                return self.done()
            if status != b"200":
                return self.fail()
            self.tally.edges_200 += 1
            self.tally.edge_bytes += len(body)
            at = head.find(b'etag: ')
            self.etag = raw[at + 6:head.index(b"\r\n", at)] if at >= 0 else b""
            edge = self.crowd.parsed(body)
            size = edge["piece_versions"]
            last = -1 if edge["last_piece"] is None else edge["last_piece"]
            if self.policy is None:  # joining: the page loaded the sealed history through REST (not simulated)
                self.policy, self.version = edge["policy"], (last + 1) * size
                self.joined = self.version
            elif edge["policy"] != self.policy:  # a new policy: start over
                self.policy, self.version = edge["policy"], 0
            if edge["version"] <= self.version:
                return self.done()
            self.pending = list(range(self.version // size, last + 1))
            self.edge = edge
        else:  # a piece's answer
            if status != b"200":
                return self.fail()
            self.tally.pieces += 1
            self.tally.piece_bytes += len(body)
            self.apply(self.crowd.parsed(body)["messages"])
            self.pending.pop(0)
        if self.pending:
            return self.send(self.crowd.piece_request(self.pending[0], self.policy or ""))
        assert self.edge is not None
        edge, self.edge = self.edge, None
        self.apply(edge["messages"])
        self.version = max(self.version, edge["version"])
        self.done()

    def apply(self, messages: list[dict[str, Any]]) -> None:
        lo = self.version
        for m in messages:
            if m["version"] > self.version:
                self.version = m["version"]
                self.applied += 1
        if self.version > lo:
            self.tally.arrivals.append((time.time(), lo, self.version))

    def done(self) -> None:
        self.busy = False
        now = self.loop.time()
        self.due = max(self.due + 1.0, now)  # behind schedule: poll now, and count the lag
        self.loop.call_at(self.due, self.poll)

    def fail(self) -> None:
        self.tally.errors += 1
        self.edge, self.pending = None, []
        self.done()

    def connection_lost(self, exc: Exception | None) -> None:
        self.transport = None
        if not self.stopping:
            self.tally.errors += 1
            self.loop.create_task(self.crowd.reconnect(self))


class Crowd:
    """The viewers of one process, the requests they send, and the bodies parsed once."""

    def __init__(self, host: str, port: int, run: str) -> None:
        self.host, self.port, self.run = host, port, run
        self.tally = Tally()
        self.edge_request = (f"GET /api/v1/runs/{run}/broadcast/edge HTTP/1.1\r\nHost: {host}\r\n\r\n").encode()
        self.bodies: dict[bytes, dict[str, Any]] = {}
        self.viewers: list[Viewer] = []

    def piece_request(self, n: int, policy: str) -> bytes:
        path = f"/api/v1/runs/{self.run}/broadcast/pieces/{n}?policy={policy}"
        return f"GET {path} HTTP/1.1\r\nHost: {self.host}\r\n\r\n".encode()

    def parsed(self, body: bytes) -> dict[str, Any]:
        got = self.bodies.get(body)
        if got is None:
            got = self.bodies[body] = json.loads(body)
            self.tally.message_versions.update(m["version"] for m in got["messages"])
            if len(self.bodies) > 256:  # old edges: keep the memory bounded
                self.bodies.pop(next(iter(self.bodies)))
        return got

    async def connect(self, viewer: Viewer, opening: asyncio.Semaphore) -> None:
        loop = asyncio.get_running_loop()
        while True:
            async with opening:
                try:
                    await loop.create_connection(lambda: viewer, self.host, self.port)
                    return
                except OSError:
                    self.tally.errors += 1
            await asyncio.sleep(0.5)

    async def reconnect(self, viewer: Viewer) -> None:
        await asyncio.sleep(1.0)
        fresh = Viewer(self, 0.0)
        fresh.policy, fresh.version, fresh.applied, fresh.joined = viewer.policy, viewer.version, viewer.applied, viewer.joined
        self.viewers[self.viewers.index(viewer)] = fresh
        await self.connect(fresh, asyncio.Semaphore(1))
        fresh.due = fresh.loop.time()
        fresh.start()


def crowd_process(url: str, run: str, n: int, conn: Any) -> None:
    """Open ``n`` viewers' connections, report ready, poll until told to stop; send the tally back."""
    host, port = url.removeprefix("http://").split(":")

    async def main() -> None:
        crowd = Crowd(host, int(port), run)
        crowd.viewers = [Viewer(crowd, random.random()) for _ in range(n)]
        opening = asyncio.Semaphore(64)
        began = time.monotonic()
        await asyncio.gather(*(crowd.connect(v, opening) for v in crowd.viewers))
        gc.freeze()
        now = asyncio.get_running_loop().time()
        for v in crowd.viewers:
            v.due = now + random.random()  # spread over the second, as a crowd arrives
            v.start()
        conn.send(("ready", time.monotonic() - began))
        await asyncio.to_thread(conn.recv)  # "mark": the measured window starts
        t = crowd.tally
        t.requests = t.edges_200 = t.edges_304 = t.pieces = t.errors = t.bytes_in = t.edge_bytes = t.piece_bytes = 0
        t.lags.clear()
        await asyncio.to_thread(conn.recv)  # "end": the window's counts; arrivals go on until "stop"
        window = dataclasses.replace(t, lags=list(t.lags))
        await asyncio.to_thread(conn.recv)  # "stop"
        for v in crowd.viewers:
            v.stopping = True
            if v.transport is not None:
                v.transport.close()
        window.arrivals, window.message_versions = t.arrivals, t.message_versions
        window.applied = [v.applied for v in crowd.viewers]
        window.held = [v.version for v in crowd.viewers]
        window.joined = [v.joined for v in crowd.viewers]
        conn.send(window)

    asyncio.run(main())
