"""Who sees a run's samples, evaluations and media (docs/samples.md): the publication policy's
kinds ``samples``, ``evals``, ``media`` (the team always sees them), the broadcast delay (a row is
public once the version that stored it is due), another project's token and anonymous readers on a
private run (as an unknown run), and the live stream (live and after a reconnect, equal to what the
API holds, withheld as the API withholds)."""

from __future__ import annotations

import asyncio
import threading
import time
from typing import Any

import httpx
import pytest

from api.outputs_data import IMAGE, everything, fetch, sample_events, send_outputs
from api.test_policy import Trainer, _put, _readers
from artifacts.live import LiveServer
from stream.helpers import sse

KINDS = ("samples", "evals", "media")
UNKNOWN = "unknownrun000000"


@pytest.fixture
def team(client: Any, seed: Any) -> dict[str, Any]:
    token, other = seed.token("team"), seed.token("rivals")
    t = Trainer(client, token).start()
    send_outputs(t, seed.blob("team", IMAGE))
    return {"t": t, "run": t.run, "token": token, "other": other}


def _withheld(seen: dict[str, Any], kind: str) -> bool:
    """Whether ``everything``'s answers withhold ``kind`` (and only show it as withheld)."""
    if kind == "samples":
        return seen["prompts"] == {"prompts": [], "withheld": True} and seen["samples"] == {
            "samples": [], "next_cursor": None, "withheld": True} and seen["whole"] == []
    if kind == "evals":
        return seen["evals"] == {"evals": [], "withheld": True} and seen["checkpoint_evals"] == [[]]
    return seen["media_keys"] == {"keys": [], "withheld": True} and seen["media"] == {
        "media": [], "next_cursor": None, "withheld": True}


@pytest.mark.parametrize("kind", KINDS)
def test_a_hidden_kind_is_withheld_from_the_public_and_shown_to_the_team(client, team, kind):
    run, readers = team["run"], _readers(team)
    before = everything(client, run)
    sample_id = before["samples"]["samples"][0]["id"]
    assert _put(client, team, {kind: "hidden"}).status_code == 200
    assert everything(client, run, readers["team"]) == before
    for who in ("anonymous", "other"):
        seen = everything(client, run, readers[who])
        assert _withheld(seen, kind), who
        for other in set(KINDS) - {kind}:  # the other kinds as they were
            assert not _withheld(seen, other) and _withheld(before, other) is False
        one = client.get(f"/api/v1/runs/{run}/samples/{sample_id}", headers=readers[who])
        unknown = client.get(f"/api/v1/runs/{run}/samples/999999999", headers=readers[who])
        assert (one.status_code, one.json()) == ((404, unknown.json()) if kind == "samples" else (200, one.json()))
        if kind in ("samples", "evals"):
            export = client.get(f"/api/v1/runs/{run}/export", params={"what": kind}, headers=readers[who])
            assert (export.status_code, export.text) == (200, "")
    detail = client.get(f"/api/v1/runs/{run}").json()
    assert detail["publication"]["withheld"] == {kind: "hidden"}
    assert _put(client, team, {kind: None}).status_code == 200  # back to the default: shown
    assert everything(client, run) == before


def test_a_private_runs_outputs_answer_as_an_unknown_run(client, seed):
    token = seed.token("team")
    t = Trainer(client, token).start(visibility="private")
    send_outputs(t, seed.blob("team", IMAGE))
    sid = fetch(client, t.run, "/samples", {"Authorization": f"Bearer {token}"})["samples"][0]["id"]
    paths = ["/samples/prompts", "/samples", f"/samples/{sid}", "/evals", "/media/keys", "/media",
             "/export?what=samples", "/export?what=evals"]
    for headers in ({}, {"Authorization": f"Bearer {seed.token('rivals')}"}):
        for path in paths:
            theirs = client.get(f"/api/v1/runs/{t.run}{path}", headers=headers)
            unknown = client.get(f"/api/v1/runs/{UNKNOWN}{path}", headers=headers)
            assert (theirs.status_code, theirs.text.replace(t.run, "<RUN>")) == (
                unknown.status_code, unknown.text.replace(UNKNOWN, "<RUN>")), path
            assert theirs.status_code == 404


DELAY = 2.0


def test_a_row_is_public_once_its_version_is_due(client, seed):
    token = seed.token("team")
    t = Trainer(client, token).start()
    team = {"run": t.run, "token": token}
    assert _put(client, team, {"delay_s": DELAY}).status_code == 200
    send_outputs(t, seed.blob("team", IMAGE))
    early = everything(client, t.run, {"Authorization": f"Bearer {token}"})
    time.sleep(DELAY + 0.3)
    t.send(*sample_events(40))
    t.send(("eval", {"step": 20, "suite": "late", "task": "x", "metrics": {"a": 1.0}, "checkpoint": 20}),
           ("media", {"step": 40, "key": "val/worst", "kind": "table", "columns": ["a"], "rows": [[1]]}))
    live = everything(client, t.run, {"Authorization": f"Bearer {token}"})
    assert live != early
    assert everything(client, t.run) == early  # the public: as it was DELAY ago
    newest = live["samples"]["samples"][-1]["id"]
    assert client.get(f"/api/v1/runs/{t.run}/samples/{newest}").status_code == 404
    lines = client.get(f"/api/v1/runs/{t.run}/export", params={"what": "samples"}).text.splitlines()
    assert len(lines) == 9  # the 3 steps due, not the 4th
    time.sleep(DELAY + 0.3)
    assert everything(client, t.run) == live


async def _batches(url: str, headers: dict[str, str], until: int, *, last_event_id: int | None = None,
                   on_reset: Any = None, timeout: float = 30) -> tuple[int, list[dict[str, Any]]]:
    """(the version a reset named, or -1; the batch messages) of one stream, read up to version ``until``."""
    if last_event_id is not None:
        headers = {**headers, "Last-Event-ID": str(last_event_id)}
    reset, out = -1, []

    async def read() -> None:
        nonlocal reset
        async with httpx.AsyncClient(timeout=timeout) as http, http.stream("GET", url, headers=headers) as response:
            assert response.status_code == 200
            async for message in sse(response):
                if message.event == "reset":
                    reset = message.version
                    if on_reset is not None:
                        on_reset()
                elif message.event == "batch":
                    out.append(message.data)
                    if message.version >= until:
                        return

    await asyncio.wait_for(read(), timeout)
    return reset, out


def _stream_rows(batches: list[dict[str, Any]], kind: str) -> list[dict[str, Any]]:
    return [row for b in batches for row in b[kind]]


def test_the_stream_carries_them_live_and_after_a_reconnect_as_the_api_holds_them(client, seed):
    token = seed.token("team")
    t = Trainer(client, token).start()
    blob = seed.blob("team", IMAGE)
    team = {"Authorization": f"Bearer {token}"}
    with LiveServer(client.app) as server:
        url = f"{server.url}/api/v1/runs/{t.run}/stream"
        writer = Trainer(httpx.Client(base_url=server.url, timeout=30), token)
        writer.run, writer.segment, writer.seq = t.run, t.segment, t.seq
        sent = threading.Event()

        def write() -> None:
            send_outputs(writer, blob)
            sent.set()

        def start_writing() -> None:
            threading.Thread(target=write, daemon=True).start()

        final = 1 + 3 * 2 + 2  # run_started, then per step metrics and samples, then evals and media
        joined, live = asyncio.run(_batches(url, team, final, on_reset=start_writing))
        assert sent.wait(30)
        _, replayed = asyncio.run(_batches(url, team, final, last_event_id=joined))
    assert live == replayed and live[-1]["version"] == final
    held = everything(client, t.run, team)
    assert _stream_rows(live, "samples") == [
        {k: s[k] for k in ("id", "segment", "step", "key", "prompt_id")} for s in held["samples"]["samples"]]
    assert _stream_rows(live, "evals") == [
        {k: e[k] for k in ("id", "segment", "step", "suite", "task", "checkpoint")} for e in held["evals"]["evals"]]
    assert _stream_rows(live, "media") == [
        {k: m[k] for k in ("id", "segment", "step", "key", "kind")} for m in held["media"]["media"]]


def test_the_stream_withholds_a_hidden_kind_from_the_public(client, seed):
    token = seed.token("team")
    t = Trainer(client, token).start(policy={"samples": "hidden"})  # from the start: no reset between
    send_outputs(t, seed.blob("team", IMAGE))
    with LiveServer(client.app) as server:
        url = f"{server.url}/api/v1/runs/{t.run}/stream"
        _, public = asyncio.run(_batches(url, {}, 9, last_event_id=0))
        _, mine = asyncio.run(_batches(url, {"Authorization": f"Bearer {token}"}, 9, last_event_id=0))
    assert _stream_rows(public, "samples") == [] and len(_stream_rows(mine, "samples")) == 9
    assert _stream_rows(public, "evals") == _stream_rows(mine, "evals") != []
    assert _stream_rows(public, "media") == _stream_rows(mine, "media") != []
