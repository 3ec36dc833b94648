"""The run_versions log: one row per version a batch made (the live stream's replay)."""

from __future__ import annotations

import time

from sqlalchemy import Connection

from runcast_server.core.db import upsert
from runcast_server.ingest.results import IngestResult
from runcast_server.ingest.tables import RUN_VERSIONS


def write_version_log(conn: Connection, result: IngestResult) -> None:
    """One ``run_versions`` row per run whose version this batch bumped (the stream's replay log).

    ``committed_at`` is when the batch is stored (now), not when it arrived (a batch may
    wait in the inbox): the broadcast delay (policy/delay.py) counts from it."""
    now = time.time()
    rows = [
        {
            "run_id": rid,
            "version": ch.version,
            "status": ch.status,
            "last_step": ch.last_step,
            "committed_at": now,
            "points": ch.points,
            "ranges": ch.ranges,
            "event_ids": sorted(ch.event_ids),
        }
        for rid, ch in sorted(result.runs.items())
        if ch.changed
    ]
    if rows:
        conn.execute(upsert(conn, RUN_VERSIONS).on_conflict_do_nothing(index_elements=["run_id", "version"]), rows)
