"""A report's publication and unpublication reach every open stream of its run as
``event: reports`` (no ``id``: the resume point stays)."""

from __future__ import annotations

import asyncio
from typing import Any

import httpx
from runcast_server.live.schemas import StreamReports

from stream.helpers import Message, sse


def test_publishing_and_unpublishing_a_report_reach_every_open_stream(server: Any) -> None:
    w = server.writer().start()
    w.batch(2, ("loss",))
    headers = {"Authorization": f"Bearer {server.token}"}
    api = f"{server.url}/api/v1/runs/{w.run}/reports"

    async def watch(client: httpx.AsyncClient, into: list[Message]) -> None:
        async with client.stream("GET", server.stream_url(w.run)) as response:
            async for m in sse(response):
                if m.event != "comment":
                    into.append(m)
                if sum(x.event == "reports" for x in into) == 2:
                    return

    async def main() -> tuple[list[Message], list[Message]]:
        async with httpx.AsyncClient(timeout=30) as client:
            made = await client.post(api, headers=headers, json={"title": "t", "body": "b", "from_step": 0,
                                                                 "to_step": 1})
            assert made.status_code == 201, made.text
            one: list[Message] = []
            two: list[Message] = []
            tasks = [asyncio.create_task(watch(client, one)), asyncio.create_task(watch(client, two))]
            while not one or not two:
                await asyncio.sleep(0.02)
            assert (await client.post(f"{api}/1/publish", headers=headers, json={})).status_code == 200
            assert (await client.post(f"{api}/1/unpublish", headers=headers)).status_code == 200
            async with asyncio.timeout(20):
                await asyncio.gather(*tasks)
            return one, two

    for got in asyncio.run(main()):
        notices = [m for m in got if m.event == "reports"]
        assert [(n.data["change"], n.data["report"], n.id) for n in notices] == [("published", 1, None),
                                                                                 ("unpublished", 1, None)]
        for n in notices:
            StreamReports.model_validate(n.data, strict=True)
