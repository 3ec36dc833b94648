"""``store_batch``, the one writer: a batch of validated events, in the caller's transaction (how: the package docstring)."""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import Any

from sqlalchemy import select
from sqlalchemy.orm import Session

from runcast_server.ingest.checks import (
    check_batch,
    check_blobs,
    check_owners,
    lock_runs,
    register_runs,
    started_segments,
    take_write_lock,
)
from runcast_server.ingest.points import write_metrics
from runcast_server.ingest.results import IngestResult
from runcast_server.ingest.state import update_runs, write_lost
from runcast_server.ingest.tables import SEGMENTS
from runcast_server.ingest.timeline import write_events
from runcast_server.outputs.store import write_outputs
from runcast_server.record import partitions
from runcast_server.runs.updates import write_updates
from runcast_server.runs.versions import RunChange, write_version_log


def store_batch(
    session: Session,
    project_id: int,
    events: Sequence[dict[str, Any]],
    *,
    received_at: float | None = None,
) -> IngestResult:
    """Write a batch of validated events (``events.validate_event`` output) in the session's transaction.

    Raises ForeignRun / UnknownRun / UnknownBlob (nothing written) when an event may not be
    stored. ``received_at`` is the server time the batch arrived (default: now);
    it stamps events and the runs' heartbeat. The caller commits. The detectors
    are not run here: they run after the commit (``alerts.engine.detect_batch``).
    """
    conn = session.connection()
    now = received_at if received_at is not None else time.time()
    take_write_lock(conn)
    started = started_segments(events)
    created_segments = 0
    if started:
        check_batch(session, project_id, events)
        created_segments = register_runs(session, project_id, events, received_at=now)
    # Without run_started (the usual batch) the checks read the rows locked here: the
    # same answer as check_batch, two round trips fewer.
    runs = lock_runs(conn, (e["run"] for e in events))
    blocks = partitions.ensure(conn, runs)
    segments = {
        (r, u): sid
        for sid, r, u in conn.execute(
            select(SEGMENTS.c.id, SEGMENTS.c.run_id, SEGMENTS.c.uid).where(SEGMENTS.c.run_id.in_(sorted(runs)))
        ).all()
    }
    if not started:
        check_owners(events, project_id, {rid: row.project_id for rid, row in runs.items()}, segments, started)
        check_blobs(conn, project_id, events)
    result = IngestResult(
        runs={rid: RunChange(run=rid, version=row.version + 1) for rid, row in runs.items()}, segments=segments
    )
    if created_segments:
        for e in events:
            if e["type"] == "run_started":
                result.runs[e["run"]].changed = True

    new_points = write_metrics(conn, events, segments, blocks, result)
    inserted_types = write_events(conn, events, segments, result, now)
    result.outputs_inserted = write_outputs(conn, events, segments, result.runs, now)
    for rid, fields in write_updates(conn, events, segments).items():
        if fields:  # a new version, so that the run's viewers read its name, tags, group or notes again
            result.runs[rid].changed = result.runs[rid].described = True
    update_runs(conn, events, runs, result, new_points, inserted_types, now)
    write_lost(conn, events, segments)
    write_version_log(conn, result)
    return result
