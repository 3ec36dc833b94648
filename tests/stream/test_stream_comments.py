"""A comment reaches every open stream of its run as ``event: comments`` (no ``id``: the resume
point stays), in both modes (in-process hub, Redis), and the batches go on after it."""

from __future__ import annotations

import asyncio
from typing import Any

import httpx
from runcast_server.live.schemas import StreamComments

from stream.helpers import Message, sse


def test_a_new_and_a_hidden_comment_reach_every_open_stream(server: Any) -> None:
    w = server.writer().start()
    w.batch(2, ("loss",))
    headers = {"Authorization": f"Bearer {server.token}"}

    async def watch(client: httpx.AsyncClient, into: list[Message]) -> None:
        async with client.stream("GET", server.stream_url(w.run)) as response:
            async for m in sse(response):
                if m.event != "comment":
                    into.append(m)
                if sum(x.event == "comments" for x in into) == 2:
                    return

    async def main() -> tuple[list[Message], list[Message]]:
        async with httpx.AsyncClient(timeout=30) as client:
            one: list[Message] = []
            two: list[Message] = []
            tasks = [asyncio.create_task(watch(client, one)), asyncio.create_task(watch(client, two))]
            while not one or not two:
                await asyncio.sleep(0.02)
            async with asyncio.timeout(20):  # production mode: the worker may not have stored step 1 yet (404)
                while (made := await client.post(
                        f"{server.url}/api/v1/runs/{w.run}/comments", headers=headers,
                        json={"body": "a bump", "anchor": {"kind": "step", "key": "loss", "step": 1}})).status_code == 404:
                    await asyncio.sleep(0.1)
            assert made.status_code == 201, made.text
            cid = made.json()["id"]
            hidden = await client.post(f"{server.url}/api/v1/runs/{w.run}/comments/{cid}/moderation",
                                       headers=headers, json={"hidden": True})
            assert hidden.status_code == 200, hidden.text
            async with asyncio.timeout(20):
                await asyncio.gather(*tasks)
            return one, two

    for got in asyncio.run(main()):
        notices = [m for m in got if m.event == "comments"]
        assert [(n.data["change"], n.id) for n in notices] == [("new", None), ("moderated", None)]
        for n in notices:
            StreamComments.model_validate(n.data, strict=True)
            assert n.data["run"] == w.run
