"""Server configuration, read from ``RUNCAST_*`` environment variables."""

from __future__ import annotations

from functools import lru_cache
from pathlib import Path

from pydantic import Field
from pydantic_settings import BaseSettings, SettingsConfigDict


def _default_data_dir() -> Path:
    return Path.home() / ".local" / "share" / "runcast"


class Settings(BaseSettings):
    """Every option has a working default: with none set, Runcast runs embedded
    (SQLite in WAL mode under ``data_dir``, Celery tasks run eagerly in the API
    process, an in-process hub for live messages)."""

    model_config = SettingsConfigDict(
        env_prefix="RUNCAST_", env_file=None, extra="ignore"
    )

    data_dir: Path = Field(
        default_factory=_default_data_dir,
        description="Where the embedded database and files live.",
    )
    database_url: str | None = Field(
        default=None, description="SQLAlchemy URL; default: SQLite under data_dir."
    )
    redis_url: str | None = Field(
        default=None,
        description="Redis for the Celery broker and live pub/sub; unset = embedded mode.",
    )
    host: str = "127.0.0.1"
    port: int = 8000
    public_url: str | None = Field(
        default=None, description="The address viewers use, for links in messages."
    )
    ingest_task_expires_s: float = Field(
        default=24 * 3600,
        description="An ingest task not run within this is discarded.",
    )
    broker_visibility_timeout_s: int = Field(
        default=3600, description="Redelivery of an unacknowledged task after this."
    )
    max_body_bytes: int = Field(
        default=8 * 1024 * 1024, description="Largest ingest request body accepted."
    )
    stall_after_s: float = Field(
        default=300,
        description="A running run whose heartbeat is older than this reads as 'stalled'.",
    )

    @property
    def embedded(self) -> bool:
        """True when no Redis is configured: eager tasks and the in-process hub."""
        return not self.redis_url

    @property
    def sqlalchemy_url(self) -> str:
        if self.database_url:
            return self.database_url
        return f"sqlite:///{self.data_dir / 'runcast.db'}"


@lru_cache
def get_settings() -> Settings:
    """The process's settings, read once."""
    return Settings()
