"""Readiness: can this process reach its database and (in production) Redis right now.

``/healthz`` is liveness (the process answers; it touches nothing). ``/readyz`` runs
these checks, each bounded by a short timeout, and answers 503 when one fails, so a
load balancer stops sending traffic to an API process whose dependencies are down.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field
from sqlalchemy import Engine, text

log = logging.getLogger(__name__)
CHECK_TIMEOUT_S = 2.0


class Check(BaseModel):
    ok: bool
    error: str | None = Field(default=None, description="Why not (the kind of failure; never a host or a path).")


class Liveness(BaseModel):
    """/healthz: the process answers."""

    model_config = ConfigDict(extra="forbid")

    status: Literal["ok"]
    version: str
    mode: Literal["embedded", "production"]


class Readiness(BaseModel):
    status: Literal["ready", "unavailable"]
    mode: Literal["embedded", "production"]
    checks: dict[str, Check] = Field(description="database, and redis in production mode.")


@dataclass
class Probes:
    """The clients the checks use, built once when the app is made."""

    engine: Engine
    redis: Any | None  # redis.Redis, production mode only

    def readiness(self) -> Readiness:
        checks = {"database": _check(self._database)}
        if self.redis is not None:
            checks["redis"] = _check(self.redis.ping)
        ok = all(c.ok for c in checks.values())
        return Readiness(status="ready" if ok else "unavailable",
                         mode="embedded" if self.redis is None else "production", checks=checks)

    def _database(self) -> None:
        with self.engine.connect() as conn:
            conn.execute(text("SELECT 1"))


def probes(engine: Engine, redis_url: str | None) -> Probes:
    client = None
    if redis_url:
        import redis

        client = redis.Redis.from_url(redis_url, socket_connect_timeout=CHECK_TIMEOUT_S, socket_timeout=CHECK_TIMEOUT_S)
    return Probes(engine=engine, redis=client)


def _check(probe: Any) -> Check:
    try:
        probe()
    except Exception as exc:  # noqa: BLE001 - any failure means "not ready"
        log.warning("readiness check failed: %s", exc)
        return Check(ok=False, error=type(exc).__name__)
    return Check(ok=True)
