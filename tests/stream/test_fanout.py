"""Fan-out inside one API process (uvicorn in a thread of the test, embedded default): the points of
a version are read from the database once per process, not once per viewer, and a disconnect
releases the viewer, then the run's channel and its hub subscription."""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from services import free_port, wait_until

from stream.helpers import Message, RunWriter, collect

pytestmark = pytest.mark.slow


@pytest.fixture
def inproc(embedded_env: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[tuple[str, str, asyncio.AbstractEventLoop, Any]]:
    """(url, token, server loop, the app's live registry) of an embedded app served by uvicorn in a thread of
    this process."""
    import uvicorn
    from runcast_server.app import create_app
    from runcast_server.core import migrate
    from runcast_server.core.auth import create_token
    from runcast_server.core.settings import Settings

    monkeypatch.setenv("RUNCAST_STREAM_LINGER_S", "0.2")
    settings = Settings()  # this app's, with the linger above
    migrate.upgrade(settings.sqlalchemy_url)
    app = create_app(settings)
    with app.state.context.database.scope() as s:
        token = create_token(s, "demo")
    port = free_port()
    registry = app.state.context.registry
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning", timeout_graceful_shutdown=2))
    loop = asyncio.new_event_loop()
    thread = threading.Thread(target=lambda: loop.run_until_complete(server.serve()), daemon=True)
    thread.start()
    wait_until(lambda: server.started, 30, "in-process server")
    try:
        yield f"http://127.0.0.1:{port}", token, loop, registry
    finally:
        loop.call_soon_threadsafe(registry.close_all)
        server.should_exit = True
        thread.join(10)


def on_loop(loop: asyncio.AbstractEventLoop, fn: Any) -> Any:
    """Run ``fn()`` on the server's loop (its registry lives there) and return the result."""

    async def call() -> Any:
        return fn()

    return asyncio.run_coroutine_threadsafe(call(), loop).result(10)


def test_one_database_read_per_version_for_all_viewers_and_disconnect_releases(inproc: Any) -> None:
    url, token, loop, registry = inproc
    api = httpx.Client(base_url=url, timeout=30)
    w = RunWriter(api, token).start()
    viewers = 60

    def channel() -> Any:
        return registry.channels.get(w.run)

    async def main() -> list[list[Message]]:
        limits = httpx.Limits(max_connections=viewers + 5)
        async with httpx.AsyncClient(timeout=30, limits=limits) as client:
            boxes: list[list[Message]] = [[] for _ in range(viewers)]
            tasks = [asyncio.create_task(collect(client, f"{url}/api/v1/runs/{w.run}/stream", 11, into=b)) for b in boxes]
            while sum(1 for b in boxes if b) < viewers:
                await asyncio.sleep(0.02)
            assert on_loop(loop, lambda: registry.viewer_count(w.run)) == viewers
            reads_before = on_loop(loop, lambda: channel().reads)
            for _ in range(10):
                await asyncio.to_thread(w.batch, 3)
            results = await asyncio.gather(*tasks)
            reads = on_loop(loop, lambda: channel().reads) - reads_before
            assert 1 <= reads <= 10, f"{reads} database reads for 10 versions and {viewers} viewers"
            return results

    results = asyncio.run(main())
    assert all([(m.event, m.version) for m in r] == [("reset", 1)] + [("batch", v) for v in range(2, 12)] for r in results)
    # Every viewer got the very same bytes object per version (encoded once): compare data.
    assert all([m.data for m in r] == [m.data for m in results[0]] for r in results)
    # All clients are gone: viewers released at once, then the channel and its hub subscription.
    wait_until(lambda: on_loop(loop, lambda: registry.viewer_count(w.run)) == 0, 10, "viewers released")
    wait_until(lambda: on_loop(loop, channel) is None, 10, "channel closed")
    wait_until(lambda: registry.hub.subscriber_count(w.run) == 0, 10, "hub subscription released")
    api.close()


def test_versions_grouped_into_passes_reach_every_viewer_once_in_order(inproc: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    """A channel whose fan-out passes are spaced out (as with thousands of viewers) hands several
    versions to each viewer per pass; every viewer, those connected before and those joining
    (with or without Last-Event-ID) while versions are waiting for a pass, still gets each version
    once, in order, from where it joined."""
    from runcast_server.live import fanout

    url, token, loop, registry = inproc
    monkeypatch.setattr(fanout, "FANOUT_IDLE", 3000.0)  # a pass of 0.5 ms holds the next one back 1.5 s
    api = httpx.Client(base_url=url, timeout=30)
    w = RunWriter(api, token).start()
    early, late, last = 40, 20, 31

    async def main() -> tuple[list[list[Message]], list[list[Message]], list[list[Message]]]:
        limits = httpx.Limits(max_connections=early + 2 * late + 5)
        async with httpx.AsyncClient(timeout=60, limits=limits) as client:
            stream = f"{url}/api/v1/runs/{w.run}/stream"
            boxes: list[list[Message]] = [[] for _ in range(early)]
            first = [asyncio.create_task(collect(client, stream, last, into=b, timeout=60)) for b in boxes]
            while sum(1 for b in boxes if b) < early:
                await asyncio.sleep(0.02)
            passes_before = on_loop(loop, lambda: registry.channels[w.run].passes)
            for _ in range(15):
                await asyncio.to_thread(w.batch, 2)
            # Joining while versions wait for a pass: from a reset, and from a version already handed out.
            fresh = [asyncio.create_task(collect(client, stream, last, timeout=60)) for _ in range(late)]
            resumed = [asyncio.create_task(collect(client, stream, last, headers={"Last-Event-ID": "1"}, timeout=60))
                       for _ in range(late)]  # fmt: skip
            for _ in range(15):
                await asyncio.to_thread(w.batch, 2)
            results = await asyncio.gather(*first), await asyncio.gather(*fresh), await asyncio.gather(*resumed)
            passes = on_loop(loop, lambda: registry.channels[w.run].passes) - passes_before
            assert passes < 30, f"{passes} passes for 30 versions: none grouped"
            return results

    first, fresh, resumed = asyncio.run(main())
    assert all([(m.event, m.version) for m in r] == [("reset", 1)] + [("batch", v) for v in range(2, last + 1)]
               for r in first)  # fmt: skip
    for r in fresh:
        assert r[0].event == "reset"
        assert [(m.event, m.version) for m in r[1:]] == [("batch", v) for v in range(r[0].version + 1, last + 1)]
    assert all([(m.event, m.version) for m in r] == [("batch", v) for v in range(2, last + 1)] for r in resumed)
    api.close()


def test_shutdown_ends_open_streams(inproc: Any) -> None:
    url, token, loop, registry = inproc
    api = httpx.Client(base_url=url, timeout=30)
    w = RunWriter(api, token).start()
    with httpx.stream("GET", f"{url}/api/v1/runs/{w.run}/stream", timeout=30) as response:
        lines = response.iter_lines()
        assert next(lines) == "retry: 1000"
        started = time.monotonic()
        loop.call_soon_threadsafe(registry.close_all)
        rest = list(lines)  # ends: the server closed the stream
        assert time.monotonic() - started < 5
        assert "event: reset" in rest
    api.close()
