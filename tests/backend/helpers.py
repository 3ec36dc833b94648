"""Helpers for the write-path tests: wire events and exact table snapshots."""

from __future__ import annotations

import itertools
import time
from typing import Any

from runcast.wire.limits import TIMESTAMP_KEY
from sqlalchemy import Engine, text

TABLES = ("projects", "ingest_tokens", "runs", "segments", "series", "points", "rollups", "events", "run_tags",
          "run_updates")
_seq = itertools.count()


def wire(kind: str, run: str = "run_aaaaaaaa", segment: str = "seg_aaaaaaaa", seq: int | None = None, **fields: Any) -> dict[str, Any]:
    """One wire event (as the SDK sends it)."""
    event = {"v": 1, "type": kind, "run": run, "segment": segment, "seq": next(_seq) if seq is None else seq, "ts": time.time()}
    event.update(fields)
    return event


def started(run: str = "run_aaaaaaaa", segment: str = "seg_aaaaaaaa", project: str = "demo", **fields: Any) -> dict[str, Any]:
    return wire("run_started", run, segment, project=project, name=fields.pop("name", "a run"), **fields)


def metrics(step: int, values: dict[str, Any], run: str = "run_aaaaaaaa", segment: str = "seg_aaaaaaaa", **kw: Any) -> dict[str, Any]:
    return wire("metrics", run, segment, step=step, values=values, **kw)


# The rows of the server's own step-time series (runcast.wire.limits.TIMESTAMP_KEY): left out of ``counts``,
# which counts what the trainer logged; tests/api/test_step_times.py checks them.
_LOGGED = {
    "series": f"SELECT count(*) FROM series WHERE key <> '{TIMESTAMP_KEY}'",
    "points": f"SELECT count(*) FROM points WHERE series_id IN (SELECT id FROM series WHERE key <> '{TIMESTAMP_KEY}')",
    "rollups": f"SELECT count(*) FROM rollups WHERE series_id IN (SELECT id FROM series WHERE key <> '{TIMESTAMP_KEY}')",
}


def counts(engine: Engine) -> dict[str, int]:
    """Row count of every table (series, points and rollups: of the logged metrics, not the step times)."""
    with engine.connect() as conn:
        return {t: conn.execute(text(_LOGGED.get(t, f"SELECT count(*) FROM {t}"))).scalar_one() for t in TABLES}


def snapshot(engine: Engine) -> dict[str, list[tuple[Any, ...]]]:
    """Every row of every table, sorted (exact comparison of database states)."""
    with engine.connect() as conn:
        return {t: sorted(map(tuple, conn.execute(text(f"SELECT * FROM {t}"))), key=repr) for t in TABLES}
