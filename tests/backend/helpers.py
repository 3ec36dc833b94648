"""Helpers for the write-path tests: wire events and exact table snapshots."""

from __future__ import annotations

import itertools
import time
from typing import Any

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


def counts(engine: Engine) -> dict[str, int]:
    """Row count of every table."""
    with engine.connect() as conn:
        return {t: conn.execute(text(f"SELECT count(*) FROM {t}")).scalar_one() for t in TABLES}


def snapshot(engine: Engine) -> dict[str, list[tuple[Any, ...]]]:
    """Every row of every table, sorted (exact comparison of database states)."""
    with engine.connect() as conn:
        return {t: sorted(map(tuple, conn.execute(text(f"SELECT * FROM {t}"))), key=repr) for t in TABLES}
