"""The live stream of a delayed run, against a real server process: the public stream carries
each batch ``delay`` after the team's copy (none early, none missing, in order, not in a
burst), a public Last-Event-ID replay never reaches a version not yet due, and lifting the
delay releases what was held back at once."""

from __future__ import annotations

import asyncio
import time
from typing import Any

import httpx

from stream.helpers import Message, points_of, sse

DELAY = 2.0
SLACK = 0.15  # the team's copy leaves after the commit; the delay counts from the store


def _put(server: Any, run: str, body: dict[str, Any]) -> None:
    r = server.api.put(f"/api/v1/runs/{run}/policy", json=body, headers={"Authorization": f"Bearer {server.token}"})
    assert r.status_code == 200, r.text


async def _watch(client: httpx.AsyncClient, url: str, into: list[tuple[float, Message]], until: int,
                 headers: dict[str, str] | None = None, timeout: float = 30) -> None:
    """(arrival time, message) of every message until one with id >= ``until``."""
    async with asyncio.timeout(timeout):
        async with client.stream("GET", url, headers=headers or {}) as response:
            assert response.status_code == 200
            async for m in sse(response):
                if m.event != "comment":
                    into.append((time.monotonic(), m))
                    if m.version >= until:
                        return


async def _for(messages: list[tuple[float, Message]], timeout: float = 10) -> None:
    async with asyncio.timeout(timeout):
        while not messages:
            await asyncio.sleep(0.01)


def test_public_stream_is_the_team_stream_delay_later(server: Any) -> None:
    w = server.writer().start()  # version 1
    _put(server, w.run, {"delay_s": DELAY})  # 2 (a reset)
    time.sleep(DELAY + 0.2)  # the run's start is due: public viewers join at version 2
    team_h = {"Authorization": f"Bearer {server.token}"}
    other_h = {"Authorization": f"Bearer {server.new_token('rivals')}"}
    last = 2 + 6

    async def main() -> dict[str, list[tuple[float, Message]]]:
        async with httpx.AsyncClient(timeout=30) as client:
            got: dict[str, list[tuple[float, Message]]] = {"team": [], "anonymous": [], "other": []}
            tasks = [asyncio.create_task(_watch(client, server.stream_url(w.run), got[who], last, headers=h))
                     for who, h in (("team", team_h), ("anonymous", {}), ("other", other_h))]
            for messages in got.values():
                await _for(messages)
            for _ in range(6):
                await asyncio.to_thread(w.batch, 3, ("loss", "lr"))
                await asyncio.sleep(0.15)
            # While held back: a public replay stops at what is due, one from ahead is reset there.
            replay: list[tuple[float, Message]] = []
            peek = asyncio.create_task(_watch(client, server.stream_url(w.run, last_event_id=2), replay, last))
            ahead: list[tuple[float, Message]] = []
            early = asyncio.create_task(_watch(client, server.stream_url(w.run, last_event_id=last), ahead, last))
            await asyncio.sleep(0.3)
            got["ahead now"] = list(ahead)
            team_replay: list[tuple[float, Message]] = []
            await _watch(client, server.stream_url(w.run, last_event_id=2), team_replay, last, headers=team_h)
            got["team replay"] = team_replay
            await asyncio.gather(*tasks, peek)
            early.cancel()
            got["replay"] = replay
            return got

    got = asyncio.run(main())
    team = {m.version: (t, m) for t, m in got["team"] if m.event == "batch"}
    assert sorted(team) == list(range(3, last + 1))
    for who in ("anonymous", "other"):
        assert [m.event for _, m in got[who][:1]] == ["reset"] and got[who][0][1].version == 2, who
        batches = [(t, m) for t, m in got[who] if m.event == "batch"]
        assert [m.version for _, m in batches] == list(range(3, last + 1)), who  # in order, none missing
        assert points_of(m for _, m in batches) == points_of(m for _, m in team.values()), who
        for t, m in batches:
            lag = t - team[m.version][0]
            assert lag >= DELAY - SLACK, (who, m.version, lag)  # none early
            assert lag <= DELAY + 1.0, (who, m.version, lag)  # as the team got them: not in a burst
    # Replays: the public one never ran ahead of the delay; the team's had everything at once.
    replayed = [(t, m) for t, m in got["replay"] if m.event == "batch"]
    assert [m.version for _, m in replayed] == list(range(3, last + 1))
    assert all(t - team[m.version][0] >= DELAY - SLACK for t, m in replayed), [(m.version, t - team[m.version][0]) for t, m in replayed]
    assert [(m.event, m.version) for _, m in got["ahead now"]] == [("reset", 2)]
    assert [m.version for _, m in got["team replay"] if m.event == "batch"] == list(range(3, last + 1))


def test_lifting_the_delay_releases_the_held_back_history_at_once(server: Any) -> None:
    w = server.writer().start()  # 1
    _put(server, w.run, {"delay_s": 30})  # 2
    time.sleep(0.3)

    async def main() -> tuple[list[tuple[float, Message]], float]:
        async with httpx.AsyncClient(timeout=30) as client:
            got: list[tuple[float, Message]] = []
            task = asyncio.create_task(_watch(client, server.stream_url(w.run), got, 6))
            await _for(got)
            for _ in range(3):  # 3, 4, 5: held back for 30 s
                await asyncio.to_thread(w.batch, 2, ("loss",))
            await asyncio.sleep(0.5)
            lifted = time.monotonic()
            await asyncio.to_thread(_put, server, w.run, {"delay_s": 0})  # 6
            await task
            return got, lifted

    got, lifted = asyncio.run(main())
    # Nothing of the run is 30 s old (production may store the run_started after the change: 2, not 1).
    assert got[0][1].event == "reset" and got[0][1].version < 2, got
    assert [m.event for _, m in got[1:]] == ["reset"]  # no batch was released before the lift...
    assert got[-1][1].version == 6 and got[-1][0] - lifted < 2.0  # ...then everything, at once
    answer = server.api.get(f"/api/v1/runs/{w.run}/metrics", params={"key": "loss"}).json()
    assert answer["series"][0]["step"] == list(range(6)) and answer["version"] == 6
