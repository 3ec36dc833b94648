"""Timeline events (checkpoints, data mix, manifests, notes, start and finish), each stored once."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from runcast.wire.events import encode_event
from sqlalchemy import Connection

from runcast_server.core.db import upsert
from runcast_server.ingest.results import IngestResult
from runcast_server.ingest.tables import EVENTS

TIMELINE_TYPES = frozenset({"run_started", "checkpoint", "data_mix", "manifest", "note", "finished"})
_ENVELOPE = ("v", "type", "run", "segment", "seq", "ts", "step")


def write_events(
    conn: Connection,
    events: Sequence[dict[str, Any]],
    segments: dict[tuple[str, str], int],
    result: IngestResult,
    now: float,
) -> dict[str, set[str]]:
    """Insert timeline events once per (segment, seq); returns run -> types really inserted."""
    rows: dict[tuple[int, int], dict[str, Any]] = {}
    for e in events:
        if e["type"] not in TIMELINE_TYPES:
            continue
        seg = segments[(e["run"], e["segment"])]
        wire = encode_event(e)
        rows.setdefault(
            (seg, e["seq"]),
            {
                "run_id": e["run"],
                "segment_id": seg,
                "seq": e["seq"],
                "type": e["type"],
                "step": e.get("step"),
                "ts": e["ts"],
                "received_at": now,
                "version": result.runs[e["run"]].version,  # the batch's run version (policy/delay.py)
                "payload": {k: v for k, v in wire.items() if k not in _ENVELOPE},
            },
        )
    if not rows:
        return {}
    stmt = (
        upsert(conn, EVENTS)
        .on_conflict_do_nothing(index_elements=["segment_id", "seq"])
        .returning(EVENTS.c.run_id, EVENTS.c.type, EVENTS.c.id)
    )
    out: dict[str, set[str]] = {}
    for run, kind, event_id in conn.execute(stmt, [rows[k] for k in sorted(rows)]):
        out.setdefault(run, set()).add(kind)
        change = result.runs[run]
        change.events.append(kind)
        change.event_ids.append(event_id)
        change.changed = True
        result.events_inserted += 1
    return out
