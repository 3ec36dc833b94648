"""A public viewer following a run through the cacheable broadcast, as docs/live.md says a
client does: read the edge, fetch the sealed pieces it lacks, apply every message once in
version order; a new policy fingerprint starts it over."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import httpx
from runcast.wire import events as ev

Point = tuple[str, int, int]  # (key, segment, step)


@dataclass
class Follower:
    api: httpx.Client
    run: str
    headers: dict[str, str] = field(default_factory=dict)
    version: int = 0  # the last version applied
    policy: str | None = None
    points: dict[Point, Any] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)
    versions: list[int] = field(default_factory=list)  # every message applied, in order
    responses: list[httpx.Response] = field(default_factory=list)
    resets: int = 0

    def get(self, path: str) -> httpx.Response:
        r = self.api.get(f"/api/v1/runs/{self.run}/broadcast/{path}", headers=self.headers)
        self.responses.append(r)
        return r

    def apply(self, message: dict[str, Any]) -> None:
        assert message["version"] > self.version, (message["version"], self.version)
        self.version = message["version"]
        self.versions.append(message["version"])
        for entry in message["points"]:
            if entry["key"] == ev.TIMESTAMP_KEY:
                continue
            for step, value in zip(entry["step"], entry["value"]):
                at = (entry["key"], entry["segment"], step)
                assert at not in self.points, f"{at} twice"
                self.points[at] = value
        self.notes.extend(e["payload"]["text"] for e in message["events"] if e["type"] == "note")

    def poll(self) -> dict[str, Any]:
        """One round: the edge, then the pieces after what is held; returns the edge."""
        r = self.get("edge")
        assert r.status_code == 200, r.text
        edge = r.json()
        if edge["policy"] != self.policy:  # a new policy: everything held was published under the old one
            if self.policy is not None:
                self.resets += 1
            self.policy, self.version = edge["policy"], 0
            self.points.clear()
            self.notes.clear()
            self.versions.clear()
        if edge["version"] <= self.version:
            return edge  # an edge older than what is held (a cached copy): nothing to do
        size = edge["piece_versions"]
        last = -1 if edge["last_piece"] is None else edge["last_piece"]
        for n in range(self.version // size, last + 1):
            p = self.get(f"pieces/{n}?policy={self.policy}")
            assert p.status_code == 200, p.text
            for m in p.json()["messages"]:
                if m["version"] > self.version:
                    self.apply(m)
            self.version = max(self.version, p.json()["last_version"])
        for m in edge["messages"]:
            if m["version"] > self.version:
                self.apply(m)
        self.version = max(self.version, edge["version"])
        return edge


def api_points(api: httpx.Client, run: str, keys: list[str], headers: dict[str, str] | None = None) -> dict[Point, Any]:
    """Every point of ``keys`` as GET /metrics answers it (raw: level 0)."""
    out: dict[Point, Any] = {}
    for key in keys:
        r = api.get(f"/api/v1/runs/{run}/metrics", params={"key": key, "max_points": 20000}, headers=headers or {})
        if r.status_code == 404:
            continue
        assert r.status_code == 200, r.text
        body = r.json()
        assert body["level"] == 0
        for s in body["series"]:
            out.update({(key, s["segment"], step): v for step, v in zip(s["step"], s["last"])})
    return out
