"""The live stream under a publication policy, against a real server process: withheld keys and
events never reach the public (live or replayed with Last-Event-ID), the team gets everything,
and a policy changed mid-run resets public viewers, after which the new policy holds."""

from __future__ import annotations

import asyncio
from typing import Any

import httpx

from stream.helpers import Message, collect, notes_of, points_of


def _keys(messages: list[Message]) -> set[str]:
    return {p[0] for p in points_of(messages)}


def _put(server: Any, run: str, body: dict[str, Any]) -> None:
    r = server.api.put(f"/api/v1/runs/{run}/policy", json=body, headers={"Authorization": f"Bearer {server.token}"})
    assert r.status_code == 200, r.text


def test_withheld_keys_and_notes_never_reach_public_streams(server: Any) -> None:
    w = server.writer().start()
    _put(server, w.run, {"metrics": ["loss"], "notes": "hidden"})  # version 2
    other = {"Authorization": f"Bearer {server.new_token('rivals')}"}
    team = {"Authorization": f"Bearer {server.token}"}
    last = 2 + 6

    async def main() -> dict[str, list[Message]]:
        async with httpx.AsyncClient(timeout=30) as client:
            got: dict[str, list[Message]] = {"anonymous": [], "other": [], "team": []}
            tasks = [asyncio.create_task(collect(client, server.stream_url(w.run), last, headers=h, into=got[who]))
                     for who, h in (("anonymous", {}), ("other", other), ("team", team))]
            while not all(got.values()):
                await asyncio.sleep(0.02)
            for i in range(6):
                await asyncio.to_thread(w.batch, 3, ("loss", "lr"), f"note {i}")
            await asyncio.gather(*tasks)
            # Replayed from the database (Last-Event-ID) as well as live.
            for who, h in (("anonymous", {}), ("team", team)):
                got[f"{who} replay"] = await collect(client, server.stream_url(w.run, last_event_id=2), last, headers=h)
            return got

    got = asyncio.run(main())
    for who in ("anonymous", "other", "anonymous replay"):
        assert _keys(got[who]) == {"loss"}, who
        # the step times go with any metric shown (withheld only with every metric)
        assert {p[0] for p in points_of(got[who], times=True)} == {"loss", "_timestamp"}, who
        assert notes_of(got[who]) == [], who
        assert len([p for p in points_of(got[who])]) == 18, who
        # (in production the run_started may be stored after the policy change: a batch 2 then)
        assert [m.version for m in got[who] if m.event == "batch" and m.version > 2] == list(range(3, last + 1)), who
    for who in ("team", "team replay"):
        assert _keys(got[who]) == {"loss", "lr"}, who
        assert notes_of(got[who]) == [f"note {i}" for i in range(6)], who
        assert len(points_of(got[who])) == 36, who
    # What the public stream carried equals what the public REST read stores.
    stored = server.api.get(f"/api/v1/runs/{w.run}/metrics", params={"key": "loss"}).json()["series"][0]["step"]
    assert sorted(p[2] for p in points_of(got["anonymous"])) == stored == list(range(18))


def test_policy_changed_mid_run_resets_public_viewers(server: Any) -> None:
    w = server.writer().start()

    async def main() -> list[Message]:
        async with httpx.AsyncClient(timeout=30) as client:
            got: list[Message] = []
            task = asyncio.create_task(collect(client, server.stream_url(w.run), 8, into=got))

            async def stored(version: int) -> None:  # production stores batches after the 202
                while not got or max(m.version for m in got) < version:
                    await asyncio.sleep(0.02)

            await stored(1)  # run_started
            steps = [lambda: _put(server, w.run, {"metrics": ["loss"]}),  # 2: reset
                     lambda: w.batch(2, ("loss", "lr")),  # 3: loss only
                     lambda: _put(server, w.run, {"metrics": "all"}),  # 4: reset
                     lambda: w.batch(2, ("loss", "lr")),  # 5: both
                     lambda: _put(server, w.run, {"metrics": ["loss"]}),  # 6: reset
                     lambda: w.batch(2, ("loss", "lr")),  # 7: loss only
                     lambda: w.batch(2, ("loss", "lr"))]  # 8
            for version, step in enumerate(steps, start=2):
                await asyncio.to_thread(step)
                await stored(version)
            return await task

    got = [m for m in asyncio.run(main()) if m.version >= 2]
    by_version = {m.version: m for m in got}
    assert [(m.event, m.version) for m in got] == [
        ("reset", 2), ("batch", 3), ("reset", 4), ("batch", 5), ("reset", 6), ("batch", 7), ("batch", 8)]
    assert _keys([by_version[3]]) == {"loss"}
    assert _keys([by_version[5]]) == {"loss", "lr"}
    assert _keys([by_version[7], by_version[8]]) == {"loss"}
    # After the reset the page reloads through REST: the key made public had its whole history.
    r = server.api.get(f"/api/v1/runs/{w.run}/metrics", params={"key": "lr"})
    assert r.status_code == 404  # withdrawn again
