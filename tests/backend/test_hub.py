"""The in-process hub: thread-safe publish, bounded subscribers, one message per batch."""

from __future__ import annotations

import asyncio
import threading
from typing import Any

import pytest
from runcast_server.core.settings import Settings
from runcast_server.live.hub import LocalHub, make_hub


@pytest.fixture
def local(embedded_env: Any) -> Any:
    hub = make_hub(Settings())  # embedded: the in-process hub
    assert type(hub) is LocalHub
    yield hub
    hub.close()


def test_publish_from_another_thread_reaches_subscriber(local: Any) -> None:
    async def main() -> list[dict[str, Any]]:
        got = []
        async with local.subscribe("run_aaaaaaaa") as sub:
            other = local.subscribe("run_bbbbbbbb")
            t = threading.Thread(target=lambda: [local.publish("run_aaaaaaaa", {"run": "run_aaaaaaaa", "version": v}) for v in (1, 2)])
            t.start()
            t.join()
            async for message in sub:
                got.append(message)
                if len(got) == 2:
                    break
            assert other._queue.empty()
            other.close()
        assert local.subscriber_count("run_aaaaaaaa") == 0
        return got

    assert [m["version"] for m in asyncio.run(main())] == [1, 2]


def test_slow_subscriber_is_dropped(local: Any) -> None:
    async def main() -> tuple[bool, list[Any]]:
        sub = local.subscribe("run_aaaaaaaa", maxsize=3)
        for v in range(10):
            local.publish("run_aaaaaaaa", {"run": "run_aaaaaaaa", "version": v})
        await asyncio.sleep(0.05)  # let the loop run the deliveries
        return sub.lagged, [m async for m in sub]

    lagged, rest = asyncio.run(main())
    assert lagged and rest == []
    assert local.subscriber_count("run_aaaaaaaa") == 0


def test_ingest_publishes_one_message_per_batch(db: Any, embedded: Any) -> None:
    from runcast_server.core.auth import create_token

    from backend.helpers import metrics, started
    from backend.test_ingest_route import post

    with db.scope() as session:
        token = create_token(session, "demo")
    messages: list[dict[str, Any]] = []

    async def listen(ready: threading.Event, done: threading.Event) -> None:
        async with embedded.app.state.context.hub.subscribe("run_aaaaaaaa") as sub:
            ready.set()
            async for m in sub:
                messages.append(m)
                if len(messages) == 2:
                    done.set()
                    return

    ready, done = threading.Event(), threading.Event()
    listener = threading.Thread(target=lambda: asyncio.run(listen(ready, done)))
    listener.start()
    assert ready.wait(5)
    assert post(embedded, [started(), *(metrics(s, {"loss": 1.0, "lr": 0.1}) for s in range(100))], token).status_code == 202
    assert post(embedded, [metrics(100, {"loss": 0.5})], token).status_code == 202
    assert post(embedded, [metrics(100, {"loss": 0.5})], token).status_code == 202  # no change, no message
    listener.join(5)
    # Each batch also wrote step times (the server's _timestamp series, which the stream carries).
    assert [(m["run"], m["version"], m["last_step"], m["keys"]) for m in messages] == [
        ("run_aaaaaaaa", 1, 99, ["_timestamp", "loss", "lr"]),
        ("run_aaaaaaaa", 2, 100, ["_timestamp", "loss"]),
    ]
