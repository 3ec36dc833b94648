"""Helpers for the stream tests: a run writer over HTTP ingest and a small SSE client."""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import AsyncIterator, Iterable
from dataclasses import dataclass, field
from typing import Any

import httpx
from runcast.wire import events as ev


@dataclass
class Message:
    """One SSE message (``event`` is "message" when unnamed) or a comment line."""

    event: str
    id: str | None = None
    data: Any = None
    comment: str | None = None

    @property
    def version(self) -> int:
        return int(self.id) if self.id is not None else -1


async def sse(response: httpx.Response) -> AsyncIterator[Message]:
    """Parse a text/event-stream response into messages (comments included, ``retry`` skipped)."""
    fields: dict[str, str] = {}
    async for line in response.aiter_lines():
        if line == "":
            if "data" in fields or "event" in fields:
                data = fields.get("data")
                yield Message(fields.get("event", "message"), fields.get("id"), json.loads(data) if data else None)
            fields = {}
        elif line.startswith(":"):
            yield Message("comment", comment=line[1:].strip())
        else:
            name, _, value = line.partition(":")
            fields[name] = value.removeprefix(" ")


@dataclass
class RunWriter:
    """One run, written as an SDK would: each ``batch`` is one POST /ingest (one run version,
    with the detectors off)."""

    api: httpx.Client
    token: str
    project: str = "demo"
    run: str = field(default_factory=ev.new_id)
    segment: str = field(default_factory=ev.new_id)
    seq: int = 0
    step: int = 0
    expected: dict[tuple[str, int, int], Any] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)

    def _event(self, kind: str, **fields: Any) -> dict[str, Any]:
        e = {"v": 1, "type": kind, "run": self.run, "segment": self.segment, "seq": self.seq, "ts": time.time(), **fields}
        self.seq += 1
        return e

    def post(self, events: Iterable[dict[str, Any]]) -> None:
        r = self.api.post("/api/v1/ingest", json={"v": 1, "events": list(events)}, headers={"Authorization": f"Bearer {self.token}"})
        assert r.status_code == 202, r.text

    def start(self, visibility: str = "public", name: str = "stream test", alerts: bool = False) -> RunWriter:
        """Open the run. The detectors are off unless ``alerts``: they run after each batch's
        commit, and each alert they open or close is a run version of its own."""
        started = self._event("run_started", project=self.project, name=name, visibility=visibility)
        if not alerts:
            started["alerts"] = {"enabled": False}
        self.post([started])
        return self

    def batch(self, steps: int = 5, keys: Iterable[str] = ("loss", "lr"), note: str | None = None) -> None:
        """``steps`` new steps of every key (one NaN among them), and a note when given."""
        events = []
        for _ in range(steps):
            values: dict[str, Any] = {}
            for k, key in enumerate(keys):
                value: Any = round(1.0 / (self.step + 1) + k, 6)
                if self.step % 7 == 3 and k == 0:
                    value = "NaN"
                values[key] = value
                self.expected[(key, 0, self.step)] = value
            events.append(self._event("metrics", step=self.step, values=values))
            self.step += 1
        if note is not None:
            events.append(self._event("note", text=note, step=self.step - 1))
            self.notes.append(note)
        self.post(events)


def points_of(messages: Iterable[Message], times: bool = False) -> list[tuple[str, int, int, Any]]:
    """Every logged (key, segment, step, value) carried by batch messages, in delivery order; with
    ``times``, the server's step times (``_timestamp``, which ride along with the points) too."""
    out = []
    for m in messages:
        if m.event == "batch":
            for series in m.data["points"]:
                assert len(series["step"]) == len(series["value"])
                if series["key"] == ev.TIMESTAMP_KEY and not times:
                    continue
                out.extend((series["key"], series["segment"], s, v) for s, v in zip(series["step"], series["value"]))
    return out


def notes_of(messages: Iterable[Message]) -> list[str]:
    return [e["payload"]["text"] for m in messages if m.event == "batch" for e in m.data["events"] if e["type"] == "note"]


async def collect(
    client: httpx.AsyncClient,
    url: str,
    until_version: int,
    *,
    headers: dict[str, str] | None = None,
    timeout: float = 30,
    into: list[Message] | None = None,
) -> list[Message]:
    """Messages (comments left out) until one with id >= ``until_version`` arrives."""
    got: list[Message] = [] if into is None else into
    async with asyncio.timeout(timeout):
        async with client.stream("GET", url, headers=headers or {}) as response:
            assert response.status_code == 200, await response.aread()
            async for m in sse(response):
                if m.event == "comment":
                    continue
                got.append(m)
                if m.version >= until_version:
                    return got
    return got
