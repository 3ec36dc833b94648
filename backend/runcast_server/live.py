"""The live stream of a run: replay from the database, then live frames fanned out per process.

One SSE message per committed ingest batch (run ``version``), as written in
docs/CONTRACTS.md ("Live stream") and docs/live.md.

Reading a version. ``store_batch`` writes one ``run_versions`` row per version it
commits: the ``[series_id, first_step, last_step, count]`` ranges of the points it
inserted, the ids of the timeline events it inserted, and the run's status and last
step. ``read_versions`` turns rows ``(after, upto]`` into messages with one range scan
of the ``points`` primary key per series (``points.version`` filters out points of
other versions inside a range), so a replay costs what it returns, not the run's length.

Fan-out. Each API process keeps one ``RunChannel`` per run that has viewers there. The
channel holds the process's one hub subscription for the run and treats hub messages
as doorbells: on a message newer than what it has emitted it reads every version it has
not emitted yet from the database -- once for all its viewers -- encodes each as one SSE
frame (bytes) and appends that same object to every viewer's bounded queue. Reading
"everything after my last version" rather than "the version in the message" makes the
channel immune to doorbells that arrive out of order or not at all (two workers
publishing, a Redis reconnect); a poll of the run's version every few seconds catches
a missed last doorbell. A viewer whose queue is full is dropped: its connection ends
and the client's reconnect (with Last-Event-ID) replays from the database. Nothing a
viewer does can block the channel or another viewer.

Readers. A message's timeline events are shown as ``reads/published.py`` shows them: a
frame holds the public form and, when it differs (a checkpoint path, a run's config or
environment, a private checkpoint), the form for readers with a token of the run's project;
each is encoded once per process, and each viewer is sent the one it may read.

Delay. When the run's publication policy sets ``delay_s`` (policy/delay.py), the channel
sends its frames live to readers of the run's project only. Its one other task
(``_hold``) releases each version to the other readers when it comes due (its
``committed_at`` plus the delay), in order, reading the due versions from the database
at that moment: one timer per channel, not per viewer, and nothing held in memory. A
public reader joins at the last version released (``public``), and its Last-Event-ID
replay reads no further. A policy change (the delay lifted, shortened, or set) resets
the run's viewers; the public ones reset to the new horizon, so whatever the delay no
longer holds back is published at once.

Writing. A viewer's response writes what its queue holds as one chunk (under load several
frames go in one write), and nothing per message arms a timer: one watch task per
process, ``Registry._watch``, sends a keep-alive comment to a viewer idle for
``keepalive_s`` and drops one whose write has not completed in ``send_timeout_s``.

Joining. A viewer registers with the channel first and notes the last version the
channel emitted (``c``), then replays ``(last_event_id, ...]`` from the channel's
recent frames when they cover it, else from the database; afterwards it skips any
queued frame whose version it already sent. Every version after ``c`` reaches the
queue, so there is no gap, and the skip means no duplicate.
"""

from __future__ import annotations

import asyncio
import json
import logging
import time
from collections import deque
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any, Final, TypeVar

from pydantic import Field
from pydantic_settings import BaseSettings, SettingsConfigDict
from sqlalchemy import select, union_all
from sqlalchemy.orm import Session
from starlette.concurrency import run_in_threadpool

from runcast_server import hub
from runcast_server.db import session_scope
from runcast_server.models import Event, Point, Run, RunVersion, Segment, Series
from runcast_server.policy.apply import TEAM, View, public_policy
from runcast_server.policy.delay import due_position
from runcast_server.reads.published import published_payload
from runcast_server.reads.values import stored_value, strict_json

RETRY_MS: Final = 1000  # the reconnect delay suggested to EventSource clients
_RANGES_PER_QUERY: Final = 50


class StreamSettings(BaseSettings):
    """Limits of the live stream, from ``RUNCAST_STREAM_*`` environment variables."""

    model_config = SettingsConfigDict(env_prefix="RUNCAST_STREAM_", env_file=None, extra="ignore")

    replay_max_versions: int = Field(default=1000, ge=1, description="A resume further behind gets `event: reset`.")
    replay_max_points: int = Field(default=100_000, ge=1, description="... as does one whose versions hold more points.")
    keepalive_s: float = Field(default=15.0, gt=0, description="A comment line after this long without a message.")
    poll_s: float = Field(default=5.0, gt=0, description="A run's channel re-reads its version this often (missed doorbells).")
    viewer_queue: int = Field(default=256, ge=1, description="Messages a viewer may fall behind before it is dropped.")
    send_timeout_s: float = Field(default=30.0, gt=0, description="A write a client does not take in this long ends its stream.")
    recent_frames: int = Field(default=256, ge=0, description="Messages a channel keeps to resume viewers without the database.")
    linger_s: float = Field(default=10.0, ge=0, description="A channel without viewers stays subscribed this long.")


@lru_cache
def stream_settings() -> StreamSettings:
    return StreamSettings()

log = logging.getLogger(__name__)
T = TypeVar("T")


# --- messages and frames --------------------------------------------------------------


@dataclass(frozen=True)
class Frame:
    """One encoded SSE message (shared, never copied, by every viewer of a process)."""

    version: int
    data: bytes  # as every reader may see it
    reset: bool = False
    project: bytes | None = None  # for readers with a token of the run's project, when it differs
    policy: str = ""  # the publication policy ``data`` was built under (View.key)
    committed_at: float = 0.0  # when the version was stored (a delayed run's public copy is due delay_s later)

    def for_reader(self, project_reader: bool) -> bytes:
        return self.project if project_reader and self.project is not None else self.data


def _dumps(obj: Any) -> str:
    return json.dumps(obj, separators=(",", ":"), allow_nan=False)


def _published(message: dict[str, Any], full: bool, project: bool, view: View = TEAM) -> dict[str, Any]:
    events = [{**e, "payload": published_payload(e["type"], e["payload"], full, project)} for e in message["events"]]
    wire = {k: v for k, v in message.items() if k != "committed_at"}
    return {**wire, "points": view.points(message["points"]), "events": view.events(events)}


def batch_frame(message: dict[str, Any], public_paths: bool = False, policy: View = TEAM) -> Frame:
    """``id: <version>`` / ``event: batch`` / ``data: <message>``, for both kinds of reader.

    ``message`` is one of ``read_versions``'s (event payloads as stored); ``public_paths``:
    the run opted in, so every reader sees its paths (not its private checkpoints' files);
    ``policy``: what the run's publication policy shows readers outside its project.
    """
    v = message["version"]
    encode = lambda m: f"id: {v}\nevent: batch\ndata: {_dumps(m)}\n\n".encode()
    public = encode(_published(message, public_paths, False, policy))
    project = encode(_published(message, True, True)) if message["events"] or policy.withheld() else public
    return Frame(v, public, project=None if project == public else project, policy=policy.key,
                 committed_at=float(message.get("committed_at") or 0.0))


def reset_frame(version: int) -> Frame:
    """``event: reset``: the client should reload through REST; live batches after ``version`` follow."""
    return Frame(version, f"id: {version}\nevent: reset\ndata: {_dumps({'version': version})}\n\n".encode(), True)


KEEPALIVE: Final = b": keep-alive\n\n"
PREAMBLE: Final = f"retry: {RETRY_MS}\n\n".encode()


# --- reading versions from the database -------------------------------------------------


@dataclass
class Replay:
    """Versions ``(after, current]`` of a run as messages; ``messages`` is None when a
    reset is due (too far behind, ahead of the run, or the log does not cover the range).
    Event payloads are as stored: ``batch_frame`` publishes them for each kind of reader."""

    current: int
    messages: list[dict[str, Any]] | None = field(default_factory=list)
    public_paths: bool = False  # the run shows its paths, host and pid to every reader
    policy: View = TEAM  # what its publication policy shows readers outside its project


def current_version(session: Session, run_id: str) -> int:
    return session.scalar(select(Run.version).where(Run.id == run_id)) or 0


def _run_position(session: Session, run_id: str) -> tuple[int, bool]:
    row = session.execute(select(Run.version, Run.public_paths).where(Run.id == run_id)).first()
    return (0, False) if row is None else (row[0] or 0, bool(row[1]))


def read_versions(
    session: Session,
    run_id: str,
    after: int,
    *,
    max_versions: int | None = None,
    max_points: int | None = None,
    upto: int | None = None,
) -> Replay:
    """Every version of ``run_id`` after ``after`` up to the run's current one (or ``upto``, when
    lower: a delayed run's public side), as stream messages.

    Cost: one read of the run row, of at most ``max_versions`` log rows, one range scan
    of the points primary key per (series, run of consecutive ranges) and one read of the
    events by id.
    """
    limits = stream_settings()
    max_versions = limits.replay_max_versions if max_versions is None else max_versions
    max_points = limits.replay_max_points if max_points is None else max_points
    current, public_paths = _run_position(session, run_id)
    if upto is not None:
        current = min(current, upto)
    policy = public_policy(session, run_id)
    if after == current:
        return Replay(current, public_paths=public_paths, policy=policy)
    if after > current or current - after > max_versions:
        return Replay(current, None, public_paths, policy)
    logs: list[RunVersion] = list(session.execute(
        select(RunVersion)
        .where(RunVersion.run_id == run_id, RunVersion.version > after, RunVersion.version <= current)
        .order_by(RunVersion.version)
    ).scalars())
    if [r.version for r in logs] != list(range(after + 1, current + 1)):
        # versions written without a log row (older data, a policy change): reload
        return Replay(current, None, public_paths, policy)
    if sum(r.points for r in logs) > max_points:
        return Replay(current, None, public_paths, policy)
    points = _read_points(session, run_id, logs, after, current)
    events = _read_events(session, [i for r in logs for i in r.event_ids])
    messages = [
        {
            "run": run_id,
            "version": r.version,
            "status": r.status,
            "last_step": r.last_step,
            "points": points.get(r.version, []),
            "events": [events[i] for i in r.event_ids if i in events],
            "committed_at": r.committed_at,  # not sent (batch_frame): a delayed run's public side times it
        }
        for r in logs
    ]
    return Replay(current, messages, public_paths, policy)


def _scan_groups(logs: list[RunVersion]) -> list[tuple[int, int, int]]:
    """(series_id, first_step, last_step) to scan: consecutive versions' ranges of a series
    are merged while steps move forward (the usual case), so a replay of N versions of a
    run logging K keys costs about K range scans, not N * K."""
    groups: dict[int, list[list[int]]] = {}
    for r in logs:
        for sid, lo, hi, _n in r.ranges:
            spans = groups.setdefault(sid, [])
            if spans and lo > spans[-1][1]:
                spans[-1][1] = hi
            else:
                spans.append([lo, hi])
    return [(sid, lo, hi) for sid, spans in sorted(groups.items()) for lo, hi in spans]


def _read_points(
    session: Session, run_id: str, logs: list[RunVersion], after: int, upto: int
) -> dict[int, list[dict[str, Any]]]:
    """version -> ``[{"key", "segment", "step": [...], "value": [...]}]`` (wire values, steps ascending)."""
    groups = _scan_groups(logs)
    if not groups:
        return {}
    p = Point.__table__.c
    rows: list[Any] = []
    for i in range(0, len(groups), _RANGES_PER_QUERY):
        selects = [
            select(p.series_id, p.step, p.value, p.version).where(
                p.series_id == sid, p.step >= lo, p.step <= hi, p.version > after, p.version <= upto
            )
            for sid, lo, hi in groups[i : i + _RANGES_PER_QUERY]
        ]
        stmt = selects[0] if len(selects) == 1 else union_all(*selects)
        rows.extend(session.execute(stmt).all())
    sids = sorted({g[0] for g in groups})
    names = {
        sid: (key, index)
        for sid, key, index in session.execute(
            select(Series.id, Series.key, Segment.index)
            .join(Segment, Segment.id == Series.segment_id)
            .where(Series.run_id == run_id, Series.id.in_(sids))
        )
    }
    # Scan ranges of one series may overlap (a late batch inside an earlier span): one row per point.
    unique = {(r[0], r[1]): r for r in rows}
    cols: dict[int, dict[int, tuple[list[int], list[Any]]]] = {}
    for sid, step, value, version in sorted(unique.values(), key=lambda r: (r[3], r[0], r[1])):
        steps, values = cols.setdefault(version, {}).setdefault(sid, ([], []))
        steps.append(step)
        values.append(stored_value(value))
    out: dict[int, list[dict[str, Any]]] = {}
    for version, series in cols.items():
        entries = []
        for sid, (steps, values) in series.items():
            key, segment = names[sid]
            entries.append({"key": key, "segment": segment, "step": steps, "value": values})
        entries.sort(key=lambda e: (e["segment"], e["key"]))
        out[version] = entries
    return out


def _read_events(session: Session, ids: list[int]) -> dict[int, dict[str, Any]]:
    """Timeline events by id, shaped as in ``GET /runs/{id}/events`` (payloads as stored)."""
    if not ids:
        return {}
    rows = session.execute(
        select(Event, Segment.index).join(Segment, Segment.id == Event.segment_id).where(Event.id.in_(ids))
    ).all()
    return {
        e.id: {
            "id": e.id,
            "type": e.type,
            "segment": index,
            "seq": e.seq,
            "step": e.step,
            "ts": e.ts,
            "received_at": e.received_at,
            "payload": strict_json(e.payload or {}),
        }
        for e, index in rows
    }


def _in_session(fn: Callable[[Session], T]) -> T:
    with session_scope() as session:
        return fn(session)


async def db(fn: Callable[[Session], T]) -> T:
    """Run ``fn(session)`` in the threadpool with a short-lived session."""
    return await run_in_threadpool(_in_session, fn)


# --- per-process fan-out ------------------------------------------------------------------


class Viewer:
    """One connection's bounded queue of frames; filled by its channel, drained by its response.

    ``project_reader``: the viewer holds a token of the run's project (reads/published.py).
    """

    def __init__(self, maxsize: int | None = None, *, project_reader: bool = False, policy: str = "") -> None:
        self.project_reader = project_reader
        self.policy = policy  # View.key of the run's public policy when the viewer connected
        self.frames: deque[Frame] = deque()
        self.wake = asyncio.Event()
        self.maxsize = stream_settings().viewer_queue if maxsize is None else maxsize
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
        self.version: int | None = None  # the last version emitted (None until started)
        self.recent: deque[Frame] = deque(maxlen=stream_settings().recent_frames)
        self.ready = asyncio.Event()
        self.reads = 0  # database reads of versions (tests and the benchmark look)
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

    # Emitting: the same Frame object goes to every viewer.
    def _emit(self, frame: Frame) -> None:
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
                await asyncio.sleep(stream_settings().poll_s)

    async def _sync_public(self, *, initial: bool = False) -> None:
        """Read the run's delay and horizon afresh; public viewers reset to it (not at start)."""
        self._resync = False

        def read(s: Session) -> tuple[float, int | None, float | None, int]:
            delay = public_policy(s, self.run_id).delay_s
            pos, due = due_position(s, self.run_id, delay, time.time())
            return delay, pos, due, current_version(s, self.run_id)

        delay, pos, due, current = await db(read)
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
            return upto, due, read_versions(s, self.run_id, after, upto=upto) if upto > after else None

        upto, due, replay = await db(read)
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
        assert self.version is not None
        after = self.version
        replay = await db(lambda s: read_versions(s, self.run_id, after))
        self.reads += 1
        if self.version != after:  # cannot happen (one task), but never emit twice
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
                sub = hub.subscribe(self.run_id, maxsize=hub.DEFAULT_MAXSIZE)
                try:
                    current = await db(lambda s: current_version(s, self.run_id))
                    if self.version is None:
                        self.version = current
                        await self._sync_public(initial=True)
                        self.ready.set()
                    elif current > self.version:
                        await self._catch_up()
                    while True:
                        try:
                            async with asyncio.timeout(stream_settings().poll_s):
                                message = await anext(sub)
                        except TimeoutError:
                            if await db(lambda s: current_version(s, self.run_id)) > self.version:
                                await self._catch_up()
                            continue
                        except StopAsyncIteration:
                            break  # the hub dropped us (lagged): resubscribe, then catch up
                        if int(message.get("version", 0)) > self.version:
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
            self._linger = asyncio.get_running_loop().call_later(stream_settings().linger_s, self._close_if_idle)

    def _close_if_idle(self) -> None:
        self._linger = None
        if not self.viewers:
            self.close()

    def close(self) -> None:
        self.registry._forget(self)
        self._task.cancel()
        self._hold_task.cancel()
        for viewer in list(self.viewers):
            viewer.close()  # graceful: each stream ends after its current write
        self.viewers.clear()


class Registry:
    """The process's channels by run id (one event loop)."""

    def __init__(self) -> None:
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
        if self._watcher is not None:
            self._watcher.cancel()
        for channel in list(self.channels.values()):
            channel.close()

    async def _watch(self) -> None:
        """Keep-alives for idle viewers, and the end of any stream whose client stopped reading."""
        settings = stream_settings()
        loop = asyncio.get_running_loop()
        every = min(1.0, settings.keepalive_s / 3, settings.send_timeout_s / 3)
        while True:
            await asyncio.sleep(every)
            now = loop.time()
            for channel in list(self.channels.values()):
                for viewer in list(channel.viewers):
                    if viewer.writing_since is not None:
                        if now - viewer.writing_since > settings.send_timeout_s:
                            log.info("live: a viewer of run %s took no write for %.0f s; its stream ends",
                                     channel.run_id, settings.send_timeout_s)
                            channel.viewers.discard(viewer)
                            viewer.abort()
                    elif now - viewer.last_write >= settings.keepalive_s and not viewer.frames:
                        viewer.keepalive()

    def viewer_count(self, run_id: str | None = None) -> int:
        chans = self.channels.values() if run_id is None else [c for c in self.channels.values() if c.run_id == run_id]
        return sum(len(c.viewers) for c in chans)


_registries: dict[asyncio.AbstractEventLoop, Registry] = {}


def registry() -> Registry:
    """The registry of the running event loop (one per API process in practice)."""
    loop = asyncio.get_running_loop()
    reg = _registries.get(loop)
    if reg is None:
        for old in [lp for lp in _registries if lp.is_closed()]:
            del _registries[old]
        reg = _registries[loop] = Registry()
    return reg


def shutdown() -> None:
    """End every open stream of this event loop (call on the loop before stopping the server,
    so that uvicorn's graceful shutdown does not wait on endless responses)."""
    reg = _registries.get(asyncio.get_running_loop())
    if reg is not None:
        reg.close_all()


# --- one viewer's stream ---------------------------------------------------------------------


async def viewer_frames(run_id: str, last_event_id: int | None, viewer: Viewer) -> AsyncIterator[bytes]:
    """The bytes of one viewer's stream: replay (or reset), then live frames and keep-alives.

    The caller has checked that the viewer may read the run. Ends when the viewer is
    closed (client gone, too slow, shutdown); closing the generator leaves the channel.
    """
    reg = registry()
    channel, joined_at = await reg.join(run_id, viewer)
    try:
        yield PREAMBLE
        held = channel.public if not viewer.project_reader else None
        if held is not None:  # a delayed run's public reader: nothing after the last version released
            if last_event_id is None or last_event_id > held:
                yield reset_frame(held).data
            else:
                replay = await db(lambda s: read_versions(s, run_id, last_event_id, upto=held))
                if replay.messages is None:
                    yield reset_frame(replay.current).data
                else:
                    for message in replay.messages:
                        yield batch_frame(message, replay.public_paths, replay.policy).data
            sent = held
        elif last_event_id is None:
            sent = joined_at
            yield reset_frame(sent).data
        else:
            cached = channel.recent_after(last_event_id)
            if cached is not None and not viewer.project_reader and any(f.policy != viewer.policy for f in cached):
                cached = None  # built under a policy changed since (its reset is on its way): read afresh
            if cached is not None:
                for frame in cached:
                    yield frame.for_reader(viewer.project_reader)
                sent = joined_at
            else:
                replay = await db(lambda s: read_versions(s, run_id, last_event_id))
                if replay.messages is None:
                    yield reset_frame(replay.current).data
                else:
                    for message in replay.messages:
                        yield batch_frame(message, replay.public_paths, replay.policy).for_reader(viewer.project_reader)
                sent = replay.current  # >= joined_at: read after joining
        while True:
            if not viewer.frames and not viewer.closed and not viewer.keepalive_due:
                viewer.wake.clear()
                await viewer.wake.wait()
            if viewer.closed:
                return
            chunk = []  # what is queued goes in one write
            while viewer.frames:
                frame = viewer.frames.popleft()
                if frame.reset or frame.version > sent:
                    sent = frame.version
                    chunk.append(frame.for_reader(viewer.project_reader))
            if viewer.keepalive_due and not chunk:
                chunk.append(KEEPALIVE)
            viewer.keepalive_due = False
            if chunk:
                yield chunk[0] if len(chunk) == 1 else b"".join(chunk)
    finally:
        channel.leave(viewer)
        viewer.close()
