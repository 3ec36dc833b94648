"""The live stream's limits: the ``stream_*`` fields of the one ``Settings`` (``RUNCAST_STREAM_*``)."""

from __future__ import annotations

from dataclasses import dataclass

from runcast_server.core.settings import Settings


@dataclass(frozen=True)
class StreamSettings:
    """Limits of the live stream (defaults: those of ``Settings``); see ``Settings.stream_*``."""

    replay_max_versions: int = 1000  # a resume further behind gets `event: reset`
    replay_max_points: int = 100_000  # ... as does one whose versions hold more points
    keepalive_s: float = 15.0  # a comment line after this long without a message
    poll_s: float = 5.0  # a run's channel re-reads its version this often (missed doorbells)
    viewer_queue: int = 256  # messages a viewer may fall behind before it is dropped
    send_timeout_s: float = 30.0  # a write a client does not take in this long ends its stream
    recent_frames: int = 256  # messages a channel keeps to resume viewers without the database
    linger_s: float = 10.0  # a channel without viewers stays subscribed this long

    @classmethod
    def of(cls, settings: Settings) -> StreamSettings:
        return cls(
            replay_max_versions=settings.stream_replay_max_versions,
            replay_max_points=settings.stream_replay_max_points,
            keepalive_s=settings.stream_keepalive_s,
            poll_s=settings.stream_poll_s,
            viewer_queue=settings.stream_viewer_queue,
            send_timeout_s=settings.stream_send_timeout_s,
            recent_frames=settings.stream_recent_frames,
            linger_s=settings.stream_linger_s,
        )
