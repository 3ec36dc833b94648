"""GET /api/v1/runs/{id}/stream against real servers: the embedded default and the production stack.

Each POST /ingest in these tests is one batch, so one run version: run_started is version 1
and the n-th metrics batch after it is version n + 1.
"""

from __future__ import annotations

import asyncio
import re
import socket
import threading
import time
from typing import Any

import httpx
import pytest
from runcast_server.live.schemas import StreamBatch, StreamReset

from stream.helpers import Message, collect, notes_of, points_of, sse

pytestmark = pytest.mark.slow


def expected_points(writer: Any) -> list[tuple[str, int, int, Any]]:
    return sorted((key, seg, step, value) for (key, seg, step), value in writer.expected.items())


def assert_exactly_once(messages: list[Message], writer: Any) -> None:
    got = points_of(messages)
    assert len(got) == len({(k, s, st) for k, s, st, _ in got}), "a point was delivered twice"
    assert sorted(got) == expected_points(writer)


def test_live_batches_arrive_in_version_order_each_point_once(server: Any) -> None:
    w = server.writer().start()

    async def main() -> list[Message]:
        async with httpx.AsyncClient(timeout=30) as client:
            got: list[Message] = []
            task = asyncio.create_task(collect(client, server.stream_url(w.run), 16, into=got))
            while not got:  # subscribed: the first message (reset) has arrived
                await asyncio.sleep(0.02)
            for i in range(15):
                await asyncio.to_thread(w.batch, 4, ("loss", "lr", "grad_norm"), f"note {i}" if i % 5 == 0 else None)
            return await task

    messages = asyncio.run(main())
    reset, batches = messages[0], messages[1:]
    assert reset.event == "reset" and reset.data == {"version": reset.version} and reset.version in (0, 1)
    assert [m.version for m in batches] == list(range(reset.version + 1, 17))
    assert all(m.event == "batch" and m.data["version"] == m.version and m.data["run"] == w.run for m in batches)
    assert_exactly_once(messages, w)
    assert notes_of(messages) == ["note 0", "note 5", "note 10"]
    last = batches[-1].data
    assert (last["status"], last["last_step"]) == ("running", 59)
    # Columnar per key and segment, steps ascending, NaN travels as the string "NaN".
    loss = next(p for p in batches[1].data["points"] if p["key"] == "loss")
    assert loss["segment"] == 0 and loss["step"] == sorted(loss["step"])
    assert "NaN" in [v for m in batches for p in m.data["points"] for v in p["value"]]
    # Each message's data is what the OpenAPI document declares for its event (live.schemas).
    for m in messages:
        (StreamReset if m.event == "reset" else StreamBatch).model_validate(m.data, strict=True)


def test_an_alert_arrives_in_the_version_after_its_batch(server: Any) -> None:
    """The detectors run after the batch's commit: the batch is one version, the alert it
    opened the next one, whose message carries the anomaly event."""
    w = server.writer().start(alerts=True)

    async def main() -> list[Message]:
        async with httpx.AsyncClient(timeout=30) as client:
            got: list[Message] = []
            task = asyncio.create_task(collect(client, server.stream_url(w.run), 3, into=got))
            while not got:
                await asyncio.sleep(0.02)
            await asyncio.to_thread(w.batch, 4, ("loss",))  # step 3 of loss is NaN: a nonfinite alert
            return await task

    messages = asyncio.run(main())
    batch, alert = [m for m in messages if m.event == "batch"][-2:]
    assert (batch.version, alert.version) == (2, 3)
    assert [p["step"] for p in batch.data["points"] if p["key"] != "_timestamp"] == [[0, 1, 2, 3]]
    assert alert.data["points"] == []
    [event] = alert.data["events"]
    assert (event["type"], event["step"], event["payload"]["kind"]) == ("anomaly", 3, "nonfinite")


def test_resume_by_last_event_id_while_logging_continues(server: Any) -> None:
    """Disconnect mid-run, keep logging, reconnect with Last-Event-ID: no gap, no duplicate,
    even though batches commit while the replay is being read."""
    w = server.writer().start()
    for _ in range(3):
        w.batch(5)
    final = 1 + 3 + 40
    done = threading.Event()

    def keep_logging() -> None:
        for _ in range(40):
            w.batch(5)
            time.sleep(0.02)
        done.set()

    async def main() -> tuple[list[Message], list[Message]]:
        async with httpx.AsyncClient(timeout=30) as client:
            writer = threading.Thread(target=keep_logging)
            writer.start()
            try:
                first = await collect(client, server.stream_url(w.run, last_event_id=0), 6)
                await asyncio.sleep(0.3)  # disconnected while batches keep committing
                second = await collect(
                    client, server.stream_url(w.run), final, headers={"Last-Event-ID": str(first[-1].version)}
                )
            finally:
                await asyncio.to_thread(writer.join)
            return first, second

    first, second = asyncio.run(main())
    assert done.is_set()
    versions = [m.version for m in first + second]
    assert versions == list(range(1, final + 1))
    assert all(m.event == "batch" for m in first + second)
    assert_exactly_once(first + second, w)


def test_query_last_event_id_and_header_wins(start_server: Any) -> None:
    server = start_server("embedded")
    w = server.writer().start()
    for _ in range(4):
        w.batch(2)

    async def main() -> tuple[list[Message], list[Message]]:
        async with httpx.AsyncClient(timeout=30) as client:
            by_query = await collect(client, server.stream_url(w.run, last_event_id=3), 5)
            header_wins = await collect(client, server.stream_url(w.run, last_event_id=1), 5, headers={"Last-Event-ID": "4"})
            return by_query, header_wins

    by_query, header_wins = asyncio.run(main())
    assert [m.version for m in by_query] == [4, 5]
    assert [m.version for m in header_wins] == [5]


@pytest.mark.services
def test_many_clients_receive_the_same_messages(start_server: Any) -> None:
    server = start_server("production")
    w = server.writer().start()
    w.batch(3)
    clients = 200

    async def main() -> list[list[Message]]:
        limits = httpx.Limits(max_connections=clients + 10, max_keepalive_connections=0)
        async with httpx.AsyncClient(timeout=60, limits=limits) as client:
            boxes: list[list[Message]] = [[] for _ in range(clients)]
            tasks = [
                asyncio.create_task(collect(client, server.stream_url(w.run, last_event_id=1), 12, into=box, timeout=90))
                for box in boxes
            ]
            while sum(1 for b in boxes if b) < clients:  # everyone has its replayed version 2
                await asyncio.sleep(0.05)
            for i in range(10):
                await asyncio.to_thread(w.batch, 3, ("loss", "lr"), f"n{i}")
            return await asyncio.gather(*tasks)

    results = asyncio.run(main())
    reference = [(m.event, m.version, m.data) for m in results[0]]
    assert [v for _, v, _ in reference] == list(range(2, 13))
    assert all([(m.event, m.version, m.data) for m in r] == reference for r in results)
    assert_exactly_once(results[0], w)


def _unread_stream(server: Any, run: str) -> socket.socket:
    """A stream from version 1 on whose client never reads (a small receive buffer)."""
    host, port = server.url.removeprefix("http://").split(":")
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    sock.connect((host, int(port)))
    sock.sendall(f"GET /api/v1/runs/{run}/stream?last_event_id=1 HTTP/1.1\r\nHost: {host}\r\n\r\n".encode())
    return sock


def _read_until_closed(sock: socket.socket, within: float) -> tuple[list[int], bool]:
    """Read what the server sent until it closes the connection or ``within`` seconds pass (a stream
    still open would be written on as this reads, then keep-alives: no end). Returns the message
    ids read and whether the server closed."""
    sock.settimeout(5)
    data, ended, deadline = bytearray(), False, time.monotonic() + within
    try:
        while not ended and time.monotonic() < deadline:
            try:
                chunk = sock.recv(1 << 20)
            except TimeoutError:
                continue
            data += chunk
            ended = not chunk
    finally:
        sock.close()
    return [int(x) for x in re.findall(rb"^id: (\d+)$", bytes(data), re.MULTILINE)], ended


def test_slow_client_is_dropped_and_does_not_delay_others(start_server: Any) -> None:
    """A client that stops reading fills its socket buffers (a few MB on loopback), then its
    queue: it is dropped, while a reading client gets every message as promptly as before."""
    server = start_server("embedded", RUNCAST_STREAM_VIEWER_QUEUE="4", RUNCAST_STREAM_SEND_TIMEOUT_S="120")
    w = server.writer().start()
    slow = _unread_stream(server, w.run)
    batches = 40
    keys = [f"k{i}" for i in range(10)]
    posted: dict[int, float] = {}

    async def main() -> dict[int, float]:
        received: dict[int, float] = {}
        async with httpx.AsyncClient(timeout=60) as client, client.stream(
            "GET", server.stream_url(w.run, last_event_id=1)
        ) as response:
            messages = sse(response)
            for i in range(batches):
                # 10,000 points (~200 KB) a message: 40 of them overflow any socket buffer.
                await asyncio.to_thread(w.batch, 1000, keys)
                posted[i + 2] = time.monotonic()
                while True:
                    async with asyncio.timeout(10):
                        m = await anext(messages)
                    if m.event == "batch":
                        received[m.version] = time.monotonic()
                        break
        return received

    received = asyncio.run(main())
    assert sorted(received) == list(range(2, batches + 2))
    delays = [received[v] - posted[v] for v in received]
    assert max(delays) < 2.0, f"the fast client waited up to {max(delays):.2f}s"
    # The slow client was dropped: after what its buffers held, the server closed the connection
    # (a client still subscribed would get keep-alives forever and never see EOF).
    ids, ended = _read_until_closed(slow, 30)
    assert ended and ids and ids == list(range(2, ids[-1] + 1)) and ids[-1] < batches + 1


def test_a_client_that_stops_reading_is_dropped_after_the_send_timeout(start_server: Any) -> None:
    """A queue long enough to hold everything does not keep a stalled client: once its socket
    buffers are full, a write not taken within RUNCAST_STREAM_SEND_TIMEOUT_S ends its stream,
    and what it had been sent is a gapless prefix."""
    # The replay limit above what 40 messages hold, so that the reconnect below replays, not resets.
    server = start_server("embedded", RUNCAST_STREAM_SEND_TIMEOUT_S="2", RUNCAST_STREAM_REPLAY_MAX_POINTS="1000000")
    w = server.writer().start()
    stalled = _unread_stream(server, w.run)
    batches = 40
    keys = [f"k{i}" for i in range(10)]
    for _ in range(batches):  # ~200 KB a message: more than the socket buffers hold, less than the queue
        w.batch(1000, keys)
    time.sleep(2 + 3)  # the send timeout, and the watch's period on top
    ids, ended = _read_until_closed(stalled, 30)
    assert ended, "the stalled client's stream was still open"
    assert ids and ids == list(range(2, ids[-1] + 1)) and ids[-1] < batches + 1
    # Its reconnect replays the rest: the drop cost the viewer nothing.

    async def resume() -> list[Message]:
        async with httpx.AsyncClient(timeout=30) as client:
            return await collect(client, server.stream_url(w.run, last_event_id=ids[-1]), batches + 1)

    assert [m.version for m in asyncio.run(resume()) if m.event == "batch"] == list(range(ids[-1] + 1, batches + 2))


def test_reset_when_too_far_behind(start_server: Any) -> None:
    server = start_server("embedded", RUNCAST_STREAM_REPLAY_MAX_VERSIONS="5", RUNCAST_STREAM_REPLAY_MAX_POINTS="35")
    w = server.writer().start()
    for _ in range(8):  # versions 2..9, 10 points each
        w.batch(5)

    async def main() -> dict[str, list[Message]]:
        out = {}
        async with httpx.AsyncClient(timeout=30) as client:
            out["ok"] = await collect(client, server.stream_url(w.run, last_event_id=6), 9)
            out["points"] = await collect(client, server.stream_url(w.run, last_event_id=5), 9)
            out["ahead"] = await collect(client, server.stream_url(w.run, last_event_id=99), 9)
            got: list[Message] = []
            task = asyncio.create_task(collect(client, server.stream_url(w.run, last_event_id=2), 10, into=got))
            while not got:
                await asyncio.sleep(0.02)
            await asyncio.to_thread(w.batch, 1)
            out["versions"] = await task
        return out

    out = asyncio.run(main())
    assert [(m.event, m.version) for m in out["ok"]] == [("batch", 7), ("batch", 8), ("batch", 9)]
    assert [(m.event, m.version, m.data) for m in out["points"]] == [("reset", 9, {"version": 9})]
    assert [(m.event, m.version, m.data) for m in out["ahead"]] == [("reset", 9, {"version": 9})]
    assert [(m.event, m.version) for m in out["versions"]] == [("reset", 9), ("batch", 10)]
    assert points_of(out["versions"][1:]) == [("loss", 0, 40, round(1 / 41, 6)), ("lr", 0, 40, round(1 / 41 + 1, 6))]


def test_private_run_stream_needs_its_projects_token(start_server: Any) -> None:
    server = start_server("embedded")
    w = server.writer().start(visibility="private")
    url = server.stream_url(w.run)
    anon = server.api.get(url)
    assert anon.status_code == 404 and anon.json() == {"error": {"message": "run not found", "field": "run"}}
    bad = server.api.get(url, headers={"Authorization": "Bearer rc_not-a-token"})
    assert bad.status_code == 401 and bad.json()["error"]["field"] == "Authorization"
    other = server.api.get(url, headers={"Authorization": f"Bearer {server.new_token('other')}"})
    assert other.status_code == 404 and other.json() == {"error": {"message": "run not found", "field": "run"}}
    with server.api.stream("GET", url, headers={"Authorization": f"Bearer {server.token}"}) as response:
        assert response.status_code == 200
        assert response.headers["content-type"].startswith("text/event-stream")
        assert response.headers["cache-control"] == "no-cache"
        lines = response.iter_lines()
        assert next(lines) == "retry: 1000"
        assert next(lines) == ""
        assert [next(lines) for _ in range(3)] == ["id: 1", "event: reset", 'data: {"version":1}']


def test_unknown_run_and_bad_resume_position(start_server: Any) -> None:
    server = start_server("embedded")
    w = server.writer().start()
    missing = server.api.get("/api/v1/runs/run_doesnotexist/stream")
    assert missing.status_code == 404
    assert missing.headers["content-type"] == "application/json"
    assert missing.json() == {"error": {"message": "run not found", "field": "run"}}
    assert server.api.get("/api/v1/runs/x/stream").status_code == 404  # not even a run id
    bad = server.api.get(f"/api/v1/runs/{w.run}/stream", headers={"Last-Event-ID": "-3"})
    assert bad.status_code == 422 and bad.json()["error"]["field"] == "Last-Event-ID"
    bad = server.api.get(f"/api/v1/runs/{w.run}/stream?last_event_id=abc")
    assert bad.status_code == 422 and bad.json()["error"]["field"] == "last_event_id"


def test_keepalive_comments_on_an_idle_stream(start_server: Any) -> None:
    server = start_server("embedded", RUNCAST_STREAM_KEEPALIVE_S="0.3")
    w = server.writer().start()

    async def main() -> list[Message]:
        got = []
        async with httpx.AsyncClient(timeout=30) as client, client.stream("GET", server.stream_url(w.run)) as response:
            async for m in sse(response):
                got.append(m)
                if sum(1 for g in got if g.event == "comment") == 3:
                    return got
        return got

    started = time.monotonic()
    got = asyncio.run(main())
    assert [m.event for m in got] == ["reset", "comment", "comment", "comment"]
    assert all(m.comment == "keep-alive" for m in got[1:])
    assert 0.8 < time.monotonic() - started < 5
