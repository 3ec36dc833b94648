"""A run's tags and its ``update`` events (config changes, summary, metric declarations, renames).

Updates are stored once per (segment, seq) in ``run_updates``; the run's ``config``,
``summary`` and ``metric_defs`` are then folded again from all of them in trainer order
(ts, segment index, seq) over the first run_started's config, so batches may arrive in
any order or twice and the result is the same. Top-level keys replace earlier ones.

``name``, ``tags``, ``group`` and ``notes`` (``run.name = ...`` in the SDK) are set from the
last update in trainer order that carries each, when a newly stored update carries it: a
rename by hand (``PATCH /runs/{id}``) stands until the trainer renames the run again.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from sqlalchemy import Connection, Table, delete, select, update

from runcast_server.core.db import upsert
from runcast_server.record.models import Event, Run, Segment
from runcast_server.runs.models import RunTag, RunUpdate

RUNS: Table = Run.__table__
TAGS: Table = RunTag.__table__
UPDATES: Table = RunUpdate.__table__
SEGMENTS: Table = Segment.__table__
EVENTS: Table = Event.__table__
DESCRIBED = ("name", "tags", "group", "notes")  # update fields that describe the run (not folded: set)


def write_tags(conn: Connection, started: Sequence[dict[str, Any]]) -> None:
    """Add the tags of these run_started events to their runs (a resume may add tags)."""
    rows = sorted({(e["run"], tag) for e in started for tag in e.get("tags") or ()})
    if rows:
        stmt = upsert(conn, TAGS).on_conflict_do_nothing(index_elements=["run_id", "tag"])
        conn.execute(stmt, [{"run_id": r, "tag": t} for r, t in rows])


def write_updates(
    conn: Connection, events: Sequence[dict[str, Any]], segments: dict[tuple[str, str], int]
) -> dict[str, set[str]]:
    """Store the batch's update events once; refold the runs that got a new one.

    Returns those runs, each with the described fields (``DESCRIBED``) its new updates carry."""
    rows = {
        (segments[(e["run"], e["segment"])], e["seq"]): {
            "run_id": e["run"],
            "segment_id": segments[(e["run"], e["segment"])],
            "seq": e["seq"],
            "ts": e["ts"],
            "body": {k: e[k] for k in ("config", "summary", "define", *DESCRIBED) if k in e},
        }
        for e in events
        if e["type"] == "update"
    }
    if not rows:
        return {}
    stmt = (
        upsert(conn, UPDATES)
        .on_conflict_do_nothing(index_elements=["segment_id", "seq"])
        .returning(UPDATES.c.run_id, UPDATES.c.segment_id, UPDATES.c.seq)
    )
    described: dict[str, set[str]] = {}
    for run, segment, seq in conn.execute(stmt, [rows[k] for k in sorted(rows)]):
        described.setdefault(run, set()).update(k for k in DESCRIBED if k in rows[(segment, seq)]["body"])
    for run in sorted(described):
        _fold(conn, run, described[run])
    return described


def _fold(conn: Connection, run: str, described: set[str]) -> None:
    u, s, e = UPDATES.c, SEGMENTS.c, EVENTS.c
    first = conn.execute(
        select(e.payload)
        .join(SEGMENTS, s.id == e.segment_id)
        .where(e.run_id == run, e.type == "run_started")
        .order_by(e.ts, s.index, e.seq)
        .limit(1)
    ).scalar()
    config: dict[str, Any] = dict((first or {}).get("config") or {})
    if first is None:  # the run_started is not stored yet: keep what the run row holds
        config = dict(conn.execute(select(RUNS.c.config).where(RUNS.c.id == run)).scalar() or {})
    summary: dict[str, Any] = {}
    defs: dict[str, Any] = {}
    bodies = conn.execute(
        select(u.body).join(SEGMENTS, s.id == u.segment_id).where(u.run_id == run).order_by(u.ts, s.index, u.seq)
    ).scalars()
    latest: dict[str, Any] = {}
    for body in bodies:
        config.update(body.get("config") or {})
        summary.update(body.get("summary") or {})
        defs.update(body.get("define") or {})
        latest.update((k, body[k]) for k in described if k in body)
    values: dict[str, Any] = {"config": config, "summary": summary, "metric_defs": defs}
    if "name" in latest:
        values["name"] = latest["name"]
    for field, column in (("group", "group_name"), ("notes", "notes")):
        if field in latest:
            values[column] = latest[field] if latest[field].strip() else None
    conn.execute(update(RUNS).where(RUNS.c.id == run).values(**values))
    if "tags" in latest:
        conn.execute(delete(TAGS).where(TAGS.c.run_id == run))
        if latest["tags"]:
            conn.execute(TAGS.insert(), [{"run_id": run, "tag": t} for t in sorted(set(latest["tags"]))])
