"""Readiness: can this process store what ingest accepts, right now.

``/healthz`` is liveness (the process answers; it touches nothing). ``/readyz`` runs
these checks, each bounded by a short timeout, and answers 503 when one fails, so a
load balancer stops sending traffic to an API process that cannot store a batch:

- ``database``: a write that changes nothing, in a transaction rolled back at once
  (``core.db.check_writable``): reachable and writable (not a read-only file, mount,
  standby or transaction; SQLite's write lock free within the timeout);
- ``disk`` (the embedded SQLite database only): free space on its filesystem at least
  ``RUNCAST_MIN_FREE_BYTES``, the very check ingest refuses batches by (``core.disk``);
- ``redis`` (production mode): the broker answers a ping.

Each failure is reported by its kind (an exception's class name), never a host or a path.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass
from functools import partial
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field
from sqlalchemy import Engine

from runcast_server.core.db import check_writable
from runcast_server.core.disk import check_room, database_dir
from runcast_server.core.settings import Settings

log = logging.getLogger(__name__)
CHECK_TIMEOUT_S = 2.0


class Check(BaseModel):
    ok: bool
    error: str | None = Field(default=None, description="Why not: the kind of failure (e.g. OperationalError, "
                              "DatabaseReadOnly, DiskFull, ConnectionError); never a host or a path.")


class Liveness(BaseModel):
    """/healthz: the process answers."""

    model_config = ConfigDict(extra="forbid")

    status: Literal["ok"]
    version: str
    mode: Literal["embedded", "production"]


class Readiness(BaseModel):
    """/readyz: whether this process can store an ingest batch now (200 ready, 503 unavailable)."""

    status: Literal["ready", "unavailable"]
    mode: Literal["embedded", "production"]
    checks: dict[str, Check] = Field(
        description="database (reachable and writable: a write rolled back at once); disk, with the embedded "
        "SQLite database only (free space where it lives at least RUNCAST_MIN_FREE_BYTES, the threshold below "
        "which ingest answers 503); redis in production mode.")


@dataclass
class Probes:
    """The checks, with the clients they use, built once when the app starts."""

    engine: Engine
    settings: Settings
    redis: Any | None  # redis.Redis, production mode only

    def readiness(self) -> Readiness:
        probes: dict[str, Callable[[], None]] = {"database": partial(check_writable, self.engine, CHECK_TIMEOUT_S)}
        if database_dir(self.settings.sqlalchemy_url) is not None:
            probes["disk"] = partial(check_room, self.settings)
        if self.redis is not None:
            probes["redis"] = self.redis.ping
        checks = {name: _check(name, probe) for name, probe in probes.items()}
        ok = all(c.ok for c in checks.values())
        return Readiness(status="ready" if ok else "unavailable",
                         mode="embedded" if self.redis is None else "production", checks=checks)


def probes(engine: Engine, settings: Settings) -> Probes:
    client = None
    if settings.redis_url:
        import redis

        client = redis.Redis.from_url(settings.redis_url, socket_connect_timeout=CHECK_TIMEOUT_S,
                                      socket_timeout=CHECK_TIMEOUT_S)
    return Probes(engine=engine, settings=settings, redis=client)


def _check(name: str, probe: Callable[[], None]) -> Check:
    try:
        probe()
    except Exception as exc:  # noqa: BLE001 - any failure means "not ready"
        log.warning("readiness check %s failed: %s", name, exc)
        return Check(ok=False, error=type(exc).__name__)
    return Check(ok=True)
