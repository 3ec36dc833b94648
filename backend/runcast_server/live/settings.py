"""The live stream's limits, from ``RUNCAST_STREAM_*`` environment variables."""

from __future__ import annotations

from functools import lru_cache

from pydantic import Field
from pydantic_settings import BaseSettings, SettingsConfigDict


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
