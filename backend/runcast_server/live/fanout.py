"""Per-process fan-out: one channel per run, one bounded queue per viewer, one watch task."""

from __future__ import annotations

import asyncio
import logging
import time
from collections import deque
from collections.abc import Callable

from sqlalchemy.orm import Session

from runcast_server.core.db import Database
from runcast_server.core.settings import Settings
from runcast_server.live.frames import Frame, batch_frame, notice_frame, reset_frame
from runcast_server.live.hub import DEFAULT_MAXSIZE, LocalHub
from runcast_server.live.replay import Replay, current_version, db, read_versions
from runcast_server.policy.apply import public_policy
from runcast_server.policy.delay import due_position

log = logging.getLogger(__name__)

# A channel's fan-out runs in passes: each hands every frame read since the last pass to every
# viewer, and costs one wake-up and one socket write per viewer, however many frames it holds.
# After a pass that took t seconds of the loop's CPU, the next waits until FANOUT_IDLE * t has
# gone by, so a channel's writes take at most 1 / (1 + FANOUT_IDLE) of the loop: a run with few
# viewers is sent each batch at once (a pass takes microseconds), one with thousands gets its
# batches grouped, and the loop keeps time for the ingest requests that make them.
FANOUT_IDLE = 1.0


class Viewer:
    """One connection's bounded queue of frames; filled by its channel, drained by its response.

    ``project_reader``: the viewer holds a token of the run's project (reads/published.py).
    """

    def __init__(self, maxsize: int, *, project_reader: bool = False, policy: str = "") -> None:
        self.project_reader = project_reader
        self.policy = policy  # View.key of the run's public policy when the viewer connected
        self.frames: deque[Frame] = deque()
        self.wake = asyncio.Event()
        self.maxsize = maxsize  # Settings.stream_viewer_queue
        self.lagged = False
        self.closed = False
        self.on_abort: Callable[[], object] | None = None  # the response stops writing at once
        # Kept by the response (api/routes/stream.py), read by Registry._watch (loop.time() values):
        self.writing_since: float | None = None  # a write in progress began then
        self.last_write = asyncio.get_running_loop().time()
        self.keepalive_due = False

    def offer(self, frame: Frame) -> None:
        if self.closed:
            return
        if len(self.frames) >= self.maxsize:
            self.lagged = True
            self.abort()
            return
        self.frames.append(frame)
        self.wake.set()

    def keepalive(self) -> None:
        """Write a keep-alive comment now if nothing else is queued (Registry._watch)."""
        self.keepalive_due = True
        self.wake.set()

    def close(self) -> None:
        """End this viewer's stream after what it is writing now."""
        self.closed = True
        self.frames.clear()
        self.wake.set()

    def abort(self) -> None:
        """End this viewer's stream now, even in the middle of a write (too slow to keep up)."""
        self.close()
        if self.on_abort is not None:
            self.on_abort()


class RunChannel:
    """The process's subscription to one run, shared by all of the process's viewers of it."""

    def __init__(self, registry: Registry, run_id: str) -> None:
        self.registry = registry
        self.run_id = run_id
        self.viewers: set[Viewer] = set()
        self.version: int | None = None  # the last version handed to the viewers (None until started)
        self.queued: int | None = None  # the last version read for them (>= version; pending until the next pass)
        self._pending: list[Frame] = []
        self._pass: asyncio.Handle | None = None  # the next fan-out pass, when one is due
        self._next_pass = 0.0  # loop time before which no pass starts (FANOUT_IDLE)
        self.settings = registry.settings
        self.recent: deque[Frame] = deque(maxlen=self.settings.stream_recent_frames)
        self.ready = asyncio.Event()
        self.reads = 0  # database reads of versions (tests and the benchmark look)
        self.passes = 0  # fan-out passes (as reads)
        self.failed: BaseException | None = None
        self._linger: asyncio.TimerHandle | None = None
        # The delayed public side (module docstring, "Delay"): None while the public follows live.
        self.public: int | None = None  # the last version released to readers outside the project
        self.delay_s = 0.0
        self._next_due: float | None = None  # when the next held back version comes due
        self._resync = False  # the policy may have changed: recompute the public side
        self._kick = asyncio.Event()
        loop = asyncio.get_running_loop()
        self._task = loop.create_task(self._run(), name=f"runcast-live-{run_id}")
        self._hold_task = loop.create_task(self._hold(), name=f"runcast-live-hold-{run_id}")

    # Emitting: the same Frame object goes to every viewer, in passes (see ``FANOUT_IDLE``).
    def _emit(self, frame: Frame) -> None:
        """Queue ``frame`` for the next fan-out pass (at once when the last pass was long enough ago)."""
        self.queued = frame.version
        self._pending.append(frame)
        if self._pass is None:
            loop = asyncio.get_running_loop()
            wait = self._next_pass - loop.time()
            self._pass = loop.call_later(wait, self._fan_out) if wait > 0 else loop.call_soon(self._fan_out)

    def _fan_out(self) -> None:
        """Hand every queued frame to every viewer (one wake-up each), then time the pass."""
        began = time.thread_time()
        self._pass = None
        self.passes += 1
        frames, self._pending = self._pending, []
        for frame in frames:
            self._deliver(frame)
        # The viewers' wake-ups (their writes) were queued on the loop before this callback.
        asyncio.get_running_loop().call_soon(self._passed, began)

    def _passed(self, began: float) -> None:
        # The loop thread's CPU time, not the clock's: a machine busy with other processes
        # does not stretch the wait.
        self._next_pass = asyncio.get_running_loop().time() + (time.thread_time() - began) * FANOUT_IDLE

    def _deliver(self, frame: Frame) -> None:
        self.version = frame.version
        if frame.reset:
            self.recent.clear()
            self._resync = True  # a policy change resets the stream: the delay may have moved
            self._kick.set()
        else:
            self.recent.append(frame)
            if self.public is not None:
                due = frame.committed_at + self.delay_s
                self._next_due = due if self._next_due is None else min(self._next_due, due)
                self._kick.set()
        held = self.public is not None
        for viewer in list(self.viewers):
            if held and not viewer.project_reader:
                continue  # released by _hold when due
            viewer.offer(frame)
            if viewer.closed:
                self.viewers.discard(viewer)

    def _notify(self, frame: Frame) -> None:
        """A notice (``Frame.notice``) to every viewer now: it carries no record, only "read again"."""
        for viewer in list(self.viewers):
            viewer.offer(frame)
            if viewer.closed:
                self.viewers.discard(viewer)

    def _offer_public(self, frame: Frame) -> None:
        for viewer in list(self.viewers):
            if not viewer.project_reader:
                viewer.offer(frame)
                if viewer.closed:
                    self.viewers.discard(viewer)

    # The delayed public side: one task per channel.
    async def _hold(self) -> None:
        await self.ready.wait()
        while True:
            self._kick.clear()
            wait = None if self.public is None or self._next_due is None else max(0.0, self._next_due - time.time())
            if not self._resync and (wait is None or wait > 0):
                try:
                    async with asyncio.timeout(wait):
                        await self._kick.wait()
                except TimeoutError:
                    pass
            try:
                if self._resync:
                    await self._sync_public()
                elif self.public is not None and self._next_due is not None and time.time() >= self._next_due:
                    await self._release()
            except asyncio.CancelledError:
                raise
            except Exception:
                log.exception("live: delayed side of run %s failed; retrying", self.run_id, extra={"run_id": self.run_id})
                self._resync = True
                await asyncio.sleep(self.settings.stream_poll_s)

    async def _sync_public(self, *, initial: bool = False) -> None:
        """Read the run's delay and horizon afresh; public viewers reset to it (not at start)."""
        self._resync = False

        def read(s: Session) -> tuple[float, int | None, float | None, int]:
            delay = public_policy(s, self.run_id).delay_s
            pos, due = due_position(s, self.run_id, delay, time.time())
            return delay, pos, due, current_version(s, self.run_id)

        delay, pos, due, current = await db(self.registry.database, read)
        was, self.delay_s = self.public, delay
        if delay <= 0:
            self.public, self._next_due = None, None
            if was is not None and not initial:
                self._offer_public(reset_frame(self.version or 0))  # whatever was held back: at once
            return
        self.public, self._next_due = (pos if pos is not None else current), due
        if not initial:
            self._offer_public(reset_frame(self.public))

    async def _release(self) -> None:
        """Send public viewers every version due now, in order (read from the database)."""
        after, delay = self.public, self.delay_s
        assert after is not None
        self._next_due = None  # frames emitted during the read set it again

        def read(s: Session) -> tuple[int, float | None, Replay | None]:
            pos, due = due_position(s, self.run_id, delay, time.time())
            upto = pos if pos is not None else current_version(s, self.run_id)
            return upto, due, self.read_versions(s, after, upto=upto) if upto > after else None

        upto, due, replay = await db(self.registry.database, read)
        self.reads += 1
        if self._resync or self.public != after:
            return  # the policy moved meanwhile: _sync_public decides
        if replay is not None:
            if replay.messages is None:
                self._offer_public(reset_frame(upto))
            else:
                for message in replay.messages:
                    self._offer_public(batch_frame(message, replay.public_paths, replay.policy))
        self.public = max(after, upto)
        if due is not None:
            self._next_due = due if self._next_due is None else min(self._next_due, due)

    def read_versions(self, s: Session, after: int, upto: int | None = None) -> Replay:
        """``replay.read_versions`` of this run within the stream's limits."""
        return read_versions(s, self.run_id, after, upto=upto, max_versions=self.settings.stream_replay_max_versions,
                             max_points=self.settings.stream_replay_max_points)

    def recent_after(self, after: int) -> list[Frame] | None:
        """The kept frames after version ``after`` when they cover ``(after, self.version]``, else None."""
        if self.version is None or after > self.version:
            return None
        if after == self.version:
            return []
        if not self.recent or self.recent[0].version > after + 1:
            return None
        return [f for f in self.recent if f.version > after]

    async def _catch_up(self) -> None:
        assert self.queued is not None
        after = self.queued
        replay = await db(self.registry.database, lambda s: self.read_versions(s, after))
        self.reads += 1
        if self.queued != after:  # cannot happen (one task), but never emit twice
            return
        if replay.messages is None:
            log.info("live: run %s jumped from version %d to %d; resetting viewers", self.run_id, after, replay.current,
                     extra={"run_id": self.run_id})
            self._emit(reset_frame(replay.current))
            return
        for message in replay.messages:
            self._emit(batch_frame(message, replay.public_paths, replay.policy))

    async def _run(self) -> None:
        try:
            while True:
                sub = self.registry.hub.subscribe(self.run_id, maxsize=DEFAULT_MAXSIZE)
                try:
                    current = await db(self.registry.database, lambda s: current_version(s, self.run_id))
                    if self.queued is None:
                        self.version = self.queued = current
                        await self._sync_public(initial=True)
                        self.ready.set()
                    elif current > self.queued:
                        await self._catch_up()
                    while True:
                        try:
                            async with asyncio.timeout(self.settings.stream_poll_s):
                                message = await anext(sub)
                        except TimeoutError:
                            if await db(self.registry.database, lambda s: current_version(s, self.run_id)) > self.queued:
                                await self._catch_up()
                            continue
                        except StopAsyncIteration:
                            break  # the hub dropped us (lagged): resubscribe, then catch up
                        notice = notice_frame(self.run_id, message)
                        if notice is not None:  # comments, reports, commands: outside the versions
                            self._notify(notice)
                            if "commands" not in message:
                                continue  # a command's record is a version too (commands/record.py): read it
                            message = {"version": await db(self.registry.database, lambda s: current_version(s, self.run_id))}
                        if int(message.get("version", 0)) > self.queued:
                            await self._catch_up()
                finally:
                    sub.close()
        except asyncio.CancelledError:
            raise
        except Exception as exc:
            log.exception("live: channel for run %s failed", self.run_id, extra={"run_id": self.run_id})
            self.failed = exc
            self._hold_task.cancel()
            self.ready.set()
            for viewer in list(self.viewers):
                viewer.close()
            self.registry._forget(self)

    def join(self, viewer: Viewer) -> int:
        """Register ``viewer``; returns the last version emitted before it (frames after it will follow)."""
        assert self.version is not None
        if self._linger is not None:
            self._linger.cancel()
            self._linger = None
        self.viewers.add(viewer)
        return self.version

    def leave(self, viewer: Viewer) -> None:
        self.viewers.discard(viewer)
        if not self.viewers and self._linger is None and not self._task.done():
            self._linger = asyncio.get_running_loop().call_later(self.settings.stream_linger_s, self._close_if_idle)

    def _close_if_idle(self) -> None:
        self._linger = None
        if not self.viewers:
            self.close()

    def close(self) -> None:
        self.registry._forget(self)
        if self._pass is not None:
            self._pass.cancel()
        self._task.cancel()
        self._hold_task.cancel()
        for viewer in list(self.viewers):
            viewer.close()  # graceful: each stream ends after its current write
        self.viewers.clear()


class Registry:
    """One app's channels by run id (on the app's event loop); on the app's context."""

    def __init__(self, settings: Settings, hub: LocalHub, database: Database) -> None:
        self.settings = settings  # its stream_* fields (RUNCAST_STREAM_*)
        self.hub = hub  # the context's: one subscription per run with viewers
        self.database = database  # the context's: the channels' reads
        self.channels: dict[str, RunChannel] = {}
        self._watcher: asyncio.Task[None] | None = None

    async def join(self, run_id: str, viewer: Viewer) -> tuple[RunChannel, int]:
        """The run's channel (made and started on first use) with ``viewer`` registered."""
        if self._watcher is None or self._watcher.done():
            self._watcher = asyncio.get_running_loop().create_task(self._watch(), name="runcast-live-watch")
        while True:
            channel = self.channels.get(run_id)
            if channel is None:
                channel = self.channels[run_id] = RunChannel(self, run_id)
            await channel.ready.wait()
            if channel.failed is None:
                return channel, channel.join(viewer)
            self._forget(channel)
            raise RuntimeError(f"live channel for run {run_id} failed") from channel.failed

    def _forget(self, channel: RunChannel) -> None:
        if self.channels.get(channel.run_id) is channel:
            del self.channels[channel.run_id]

    def close_all(self) -> None:
        """End every open stream (call on the app's loop before stopping the server, so that
        uvicorn's graceful shutdown does not wait on endless responses)."""
        if self._watcher is not None:
            self._watcher.cancel()
        for channel in list(self.channels.values()):
            channel.close()

    async def _watch(self) -> None:
        """Keep-alives for idle viewers, and the end of any stream whose client stopped reading."""
        settings = self.settings
        loop = asyncio.get_running_loop()
        every = min(1.0, settings.stream_keepalive_s / 3, settings.stream_send_timeout_s / 3)
        while True:
            await asyncio.sleep(every)
            now = loop.time()
            for channel in list(self.channels.values()):
                for viewer in list(channel.viewers):
                    if viewer.writing_since is not None:
                        if now - viewer.writing_since > settings.stream_send_timeout_s:
                            log.info("live: a viewer of run %s took no write for %.0f s; its stream ends",
                                     channel.run_id, settings.stream_send_timeout_s)
                            channel.viewers.discard(viewer)
                            viewer.abort()
                    elif now - viewer.last_write >= settings.stream_keepalive_s and not viewer.frames:
                        viewer.keepalive()

    def viewer_count(self, run_id: str | None = None) -> int:
        chans = self.channels.values() if run_id is None else [c for c in self.channels.values() if c.run_id == run_id]
        return sum(len(c.viewers) for c in chans)
