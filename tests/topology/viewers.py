"""SSE viewers for the topology tests: each in its own thread, reconnecting with Last-Event-ID
like a browser's EventSource, recording every message it gets."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import httpx


@dataclass
class Message:
    id: int
    event: str
    data: Any


def messages(response: httpx.Response, stop: threading.Event) -> Iterator[Message]:
    """The messages of a text/event-stream response (comments skipped) until ``stop`` is set."""
    fields: dict[str, str] = {}
    for line in response.iter_lines():
        if stop.is_set():
            return
        if line == "":
            if "data" in fields:
                yield Message(int(fields.get("id", "-1")), fields.get("event", "message"), json.loads(fields["data"]))
            fields = {}
        elif not line.startswith(":"):
            name, _, value = line.partition(":")
            fields[name] = value.removeprefix(" ")


@dataclass
class Viewer:
    """One viewer of ``url``: starts from Last-Event-ID 0 (every version), reconnects after
    any end or error with the last id it received."""

    url: str
    name: str
    received: list[Message] = field(default_factory=list)
    connections: int = 0
    refused: list[int] = field(default_factory=list)
    stop: threading.Event = field(default_factory=threading.Event)

    def __post_init__(self) -> None:
        self.thread = threading.Thread(target=self._run, name=self.name, daemon=True)

    @property
    def last(self) -> int:
        return self.received[-1].id if self.received else 0

    def start(self) -> Viewer:
        self.thread.start()
        return self

    def _run(self) -> None:
        # The servers send a comment every second (RUNCAST_STREAM_KEEPALIVE_S): a read
        # timeout of 5 s means a dead connection, which is ended and resumed.
        with httpx.Client(timeout=httpx.Timeout(10, read=5)) as client:
            while not self.stop.is_set():
                try:
                    with client.stream("GET", self.url, headers={"Last-Event-ID": str(self.last)}) as r:
                        if r.status_code != 200:
                            self.refused.append(r.status_code)
                        else:
                            self.connections += 1
                            for m in messages(r, self.stop):
                                self.received.append(m)
                except httpx.HTTPError:
                    pass
                time.sleep(0.2)

    def close(self) -> None:
        self.stop.set()
        self.thread.join(timeout=15)

    def points(self, times: bool = False) -> list[tuple[str, int, int, Any]]:
        """Every (key, segment, step, value) the messages carried, in delivery order: the logged
        points, or with ``times`` only the server's step times (``_timestamp``) that ride along."""
        out = []
        for m in self.received:
            if m.event == "batch":
                for s in m.data["points"]:
                    if (s["key"] == "_timestamp") == times:
                        out.extend((s["key"], s["segment"], step, v) for step, v in zip(s["step"], s["value"]))
        return out

    def notes(self) -> list[str]:
        return [e["payload"]["text"] for m in self.received if m.event == "batch"
                for e in m.data["events"] if e["type"] == "note"]
