"""Live messages: one per committed ingest batch, on channel ``run:<id>``.

A hub (``make_hub(settings)``, one per process, on the ``AppContext``: ``ctx.hub``) has
two methods:

* ``hub.publish(run_id, message)`` -- from any thread or process, after a commit.
  ``message`` is a JSON-able dict with at least ``{"run", "version"}``.
* ``hub.subscribe(run_id)`` -- on the API's event loop; returns a ``Subscription``,
  an async iterator of messages. Use it as ``async with hub.subscribe(rid) as sub:
  async for message in sub: ...``.

Embedded mode: an in-process hub. Production (``RUNCAST_REDIS_URL`` set):
``publish`` is a Redis ``PUBLISH``, and each API process holds one Redis
subscription (``PSUBSCRIBE run:*``) that fans messages out to its local
subscribers. Queues are bounded: a subscriber that falls ``maxsize`` messages
behind is dropped -- its iterator ends and ``sub.lagged`` is True -- and should
reconnect and catch up from the database (the run ``version`` is the resume point).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import threading
from collections.abc import AsyncIterator
from typing import Any, Final, Self

from runcast_server.core.settings import Settings

CHANNEL_PREFIX: Final = "run:"
DEFAULT_MAXSIZE: Final = 256

log = logging.getLogger(__name__)
_END: Final = object()


def channel(run_id: str) -> str:
    """The pub/sub channel of a run."""
    return CHANNEL_PREFIX + run_id


class Subscription:
    """One subscriber's bounded queue of messages for one run (lives on one event loop)."""

    def __init__(self, hub: LocalHub, run_id: str, loop: asyncio.AbstractEventLoop, maxsize: int) -> None:
        self.run_id = run_id
        self.lagged = False
        self._hub = hub
        self._loop = loop
        self._queue: asyncio.Queue[Any] = asyncio.Queue(maxsize=maxsize + 1)  # +1: room for the end mark
        self._maxsize = maxsize
        self._closed = False

    def _offer(self, message: dict[str, Any]) -> None:
        """Queue a message (on the loop); a full queue drops this subscriber."""
        if self._closed:
            return
        if self._queue.qsize() >= self._maxsize:
            self.lagged = True
            self.close()
            return
        self._queue.put_nowait(message)

    def close(self) -> None:
        """Stop receiving; a pending ``async for`` ends. Call on the subscriber's loop."""
        if self._closed:
            return
        self._closed = True
        self._hub._remove(self)
        while not self._queue.empty():
            self._queue.get_nowait()
        self._queue.put_nowait(_END)

    def __aiter__(self) -> AsyncIterator[dict[str, Any]]:
        return self

    async def __anext__(self) -> dict[str, Any]:
        item = await self._queue.get()
        if item is _END:
            self._queue.put_nowait(_END)
            raise StopAsyncIteration
        return item

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(self, *exc: object) -> None:
        self.close()


class LocalHub:
    """In-process fan-out: thread-safe ``publish``, asyncio subscribers."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._subs: dict[str, set[Subscription]] = {}

    def subscribe(self, run_id: str, maxsize: int = DEFAULT_MAXSIZE) -> Subscription:
        """A new subscription to ``run_id``; call on the event loop that will consume it."""
        sub = Subscription(self, run_id, asyncio.get_running_loop(), maxsize)
        with self._lock:
            self._subs.setdefault(run_id, set()).add(sub)
        return sub

    def publish(self, run_id: str, message: dict[str, Any]) -> None:
        """Deliver ``message`` to every local subscriber of ``run_id``."""
        self.deliver(run_id, message)

    def deliver(self, run_id: str, message: dict[str, Any]) -> None:
        with self._lock:
            subs = list(self._subs.get(run_id, ()))
        for sub in subs:
            try:
                sub._loop.call_soon_threadsafe(sub._offer, message)
            except RuntimeError:  # the subscriber's loop is closed
                self._remove(sub)

    def subscriber_count(self, run_id: str) -> int:
        with self._lock:
            return len(self._subs.get(run_id, ()))

    def _remove(self, sub: Subscription) -> None:
        with self._lock:
            subs = self._subs.get(sub.run_id)
            if subs is not None:
                subs.discard(sub)
                if not subs:
                    del self._subs[sub.run_id]

    def close(self) -> None:
        """Forget every subscriber (tests and shutdown)."""
        with self._lock:
            self._subs.clear()


class RedisHub(LocalHub):
    """Redis PUBLISH out; one PSUBSCRIBE per process (per event loop) fanned out locally."""

    def __init__(self, url: str) -> None:
        super().__init__()
        self._url = url
        self._client: Any = None
        self._listeners: dict[asyncio.AbstractEventLoop, asyncio.Task[None]] = {}

    def publish(self, run_id: str, message: dict[str, Any]) -> None:
        if self._client is None:
            import redis

            self._client = redis.Redis.from_url(self._url, socket_connect_timeout=2, socket_timeout=5)
        self._client.publish(channel(run_id), json.dumps(message, allow_nan=False))

    def subscribe(self, run_id: str, maxsize: int = DEFAULT_MAXSIZE) -> Subscription:
        loop = asyncio.get_running_loop()
        with self._lock:
            if loop not in self._listeners or self._listeners[loop].done():
                self._listeners[loop] = loop.create_task(self._listen(), name="runcast-hub-listener")
        return super().subscribe(run_id, maxsize)

    async def _listen(self) -> None:
        import redis.asyncio as aioredis

        delay = 0.5
        while True:
            client = aioredis.Redis.from_url(self._url)
            try:
                async with client.pubsub() as pubsub:
                    await pubsub.psubscribe(CHANNEL_PREFIX + "*")
                    delay = 0.5
                    async for raw in pubsub.listen():
                        if raw.get("type") != "pmessage":
                            continue
                        name = raw["channel"].decode() if isinstance(raw["channel"], bytes) else raw["channel"]
                        try:
                            message = json.loads(raw["data"])
                        except ValueError:
                            continue
                        self.deliver(name[len(CHANNEL_PREFIX) :], message)
            except asyncio.CancelledError:
                raise
            except Exception:
                log.warning("hub: Redis subscription lost; reconnecting in %.1fs", delay, exc_info=True)
                await asyncio.sleep(delay)
                delay = min(delay * 2, 30.0)
            finally:
                with contextlib.suppress(Exception):
                    await client.aclose()

    def close(self) -> None:
        super().close()
        for task in self._listeners.values():
            task.cancel()
        self._listeners.clear()


def make_hub(settings: Settings) -> LocalHub:
    """The hub for ``settings`` (in-process when embedded, else Redis): built once per process
    by whoever builds its ``AppContext``, which owns it (closed with the context)."""
    return LocalHub() if settings.embedded else RedisHub(settings.redis_url or "")
