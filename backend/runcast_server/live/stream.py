"""One viewer's stream: replay (or reset), then live frames and keep-alives."""

from __future__ import annotations

from collections.abc import AsyncGenerator

from runcast_server.live.fanout import Registry, Viewer
from runcast_server.live.frames import KEEPALIVE, PREAMBLE, batch_frame, reset_frame
from runcast_server.live.replay import db


async def viewer_frames(reg: Registry, run_id: str, last_event_id: int | None, viewer: Viewer) -> AsyncGenerator[bytes, None]:
    """The bytes of one viewer's stream: replay (or reset), then live frames and keep-alives.

    The caller has checked that the viewer may read the run. Ends when the viewer is
    closed (client gone, too slow, shutdown); closing the generator leaves the channel.
    """
    channel, joined_at = await reg.join(run_id, viewer)
    try:
        yield PREAMBLE
        held = channel.public if not viewer.project_reader else None
        if held is not None:  # a delayed run's public reader: nothing after the last version released
            if last_event_id is None or last_event_id > held:
                yield reset_frame(held).data
            else:
                replay = await db(reg.database, lambda s: channel.read_versions(s, last_event_id, upto=held))
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
                replay = await db(reg.database, lambda s: channel.read_versions(s, last_event_id))
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
                if frame.notice:
                    chunk.append(frame.data)
                elif frame.reset or frame.version > sent:
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
