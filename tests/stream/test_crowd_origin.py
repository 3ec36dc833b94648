"""A crowd reaching the origin at once (a cache's expired edge, a first-load burst): the embedded
API answers every public read, and takes the trainer's ingest meanwhile. Found by
bench/broadcast_crowd.py: ~140 concurrent edge requests froze the API for minutes (every worker
thread waited on the database pool while the requests holding its connections waited for a
thread). No timing is asserted: only that everything answers, within a generous bound."""

from __future__ import annotations

import asyncio
import time
from typing import Any

import httpx

CROWD = 300
KEYS = ("loss", "lr")


def crowd_urls(run: str, policy: str) -> list[str]:
    """What public viewers read: the broadcast, and the run page's first loads."""
    base = f"/api/v1/runs/{run}"
    return [base + "/broadcast/edge", base + f"/broadcast/pieces/0?policy={policy}", base,
            base + "/metrics?key=loss&max_points=1520", base + "/events?limit=1000", base + "/alerts?limit=100",
            base + "/checkpoints", base + "/revisions", base + "/evals", base + "/samples", base + "/media/keys",
            base + "/data-mix", base + "/comments"]


async def burst(url: str, urls: list[str], during: Any) -> tuple[list[int], int]:
    limits = httpx.Limits(max_connections=CROWD, max_keepalive_connections=0)
    async with httpx.AsyncClient(base_url=url, timeout=120, limits=limits) as client:
        requests = [asyncio.ensure_future(client.get(urls[i % len(urls)])) for i in range(CROWD)]
        await asyncio.sleep(0.05)  # the burst is under way
        ingest = await asyncio.to_thread(during)
        answers = await asyncio.gather(*requests)
    return [r.status_code for r in answers], ingest


def test_a_crowd_at_the_origin_is_answered_and_ingest_goes_on(start_server: Any) -> None:
    server = start_server("embedded", RUNCAST_BROADCAST_PIECE_VERSIONS="4")
    w = server.writer().start()
    for _ in range(9):
        w.batch(3, KEYS)
    policy = server.api.get(f"/api/v1/runs/{w.run}/broadcast/edge").json()["policy"]
    urls = crowd_urls(w.run, policy)
    assert [server.api.get(u).status_code for u in urls] == [200] * len(urls)

    def ingest() -> int:
        with httpx.Client(base_url=server.url, timeout=120) as c:
            event = {"v": 1, "type": "metrics", "run": w.run, "segment": w.segment, "seq": w.seq, "ts": time.time(),
                     "step": 10_000, "values": {"loss": 1.0}}
            return c.post("/api/v1/ingest", json={"v": 1, "events": [event]},
                          headers={"Authorization": f"Bearer {server.token}"}).status_code

    statuses, accepted = asyncio.run(asyncio.wait_for(burst(server.url, urls, ingest), 300))
    assert accepted == 202
    assert {s: statuses.count(s) for s in set(statuses)} == {200: CROWD}
