"""The door of the write path: may this project write these events, and the runs and segments they start."""

from __future__ import annotations

import time
from collections.abc import Iterable, Sequence
from typing import Any, Final

from sqlalchemy import Connection, bindparam, select
from sqlalchemy.orm import Session

from runcast_server.core.db import noop_write, upsert
from runcast_server.core.models import Project
from runcast_server.ingest.bulk import is_sqlite
from runcast_server.ingest.results import ForeignRun, TakenRun, UnknownBlob, UnknownRun, WrongProject
from runcast_server.ingest.tables import RUNS, SEGMENTS
from runcast_server.outputs.store import missing_blob
from runcast_server.policy.store import record_initial
from runcast_server.runs.updates import write_tags


def started_segments(events: Sequence[dict[str, Any]]) -> dict[tuple[str, str], int]:
    """(run, segment) -> index of its run_started in the batch."""
    out: dict[tuple[str, str], int] = {}
    for i, e in enumerate(events):
        if e["type"] == "run_started":
            out.setdefault((e["run"], e["segment"]), i)
    return out


def check_batch(session: Session, project_id: int, events: Sequence[dict[str, Any]]) -> set[str]:
    """Raise ForeignRun or UnknownRun for the first event the project may not write.

    Every event's run must be stored under ``project_id`` or started in this
    batch, every event's segment stored or started in this batch, and every image's
    blob held by the project (``UnknownBlob``). Reads only. Returns the batch's runs that have
    commands waiting (``runs.commands_pending``, read with the runs' owners: no query of its own).
    """
    conn = session.connection()
    started = started_segments(events)
    if started:
        name = conn.execute(select(Project.name).where(Project.id == project_id)).scalar_one()
        for i in sorted(started.values()):
            if events[i].get("project", name) != name:  # none named: the token's project
                raise WrongProject(
                    f"run_started names project {events[i]['project']!r}, the token is for {name!r}",
                    field="project",
                    index=i,
                )
    rows = conn.execute(_OWNERS, {"ids": sorted({e["run"] for e in events})}).all()
    owner = {row.id: row.project_id for row in rows}
    stored_segments: set[tuple[str, str]] = set()
    if owner:
        stored_segments = {(r, u) for r, u in conn.execute(_SEGMENTS_OF, {"ids": sorted(owner)}).all()}
    check_owners(events, project_id, owner, stored_segments, started)
    check_blobs(conn, project_id, events)
    return {row.id for row in rows if row.commands_pending}


def check_blobs(conn: Connection, project_id: int, events: Sequence[dict[str, Any]]) -> None:
    """Raise UnknownBlob for the first image event whose blob the project does not hold."""
    missing = missing_blob(conn, project_id, events)
    if missing is not None:
        index, sha = missing
        raise UnknownBlob(f"unknown blob {sha}: upload the image (PUT /runs/{{run}}/blobs/{{sha256}}) first",
                          field="blob", index=index)


def check_owners(
    events: Sequence[dict[str, Any]],
    project_id: int,
    owner: dict[str, int],
    stored_segments: set[tuple[str, str]] | dict[tuple[str, str], Any],
    started: dict[tuple[str, str], int],
) -> None:
    """The run and segment checks of ``check_batch``, on rows already read."""
    started_runs = {run for run, _ in started}
    for i, e in enumerate(events):
        run = e["run"]
        if run in owner and owner[run] != project_id:
            if e["type"] == "run_started":
                raise TakenRun(f"run id {run!r} is taken: start a new run", field="run", index=i)
            raise ForeignRun(_unknown_run(run), field="run", index=i)
        if run not in owner and run not in started_runs:
            raise UnknownRun(_unknown_run(run), field="run", index=i)
        key = (run, e["segment"])
        if key not in stored_segments and key not in started:
            raise UnknownRun(
                f"unknown segment {e['segment']!r} of run {run!r}: send its run_started first",
                field="segment",
                index=i,
            )


def _unknown_run(run: str) -> str:
    return f"unknown run {run!r}: send its run_started first"


def lock_runs(conn: Connection, run_ids: Iterable[str]) -> dict[str, Any]:
    """Lock the runs' rows in id order and return them by id."""
    stmt = _READ_RUNS if is_sqlite(conn) else _LOCK_RUNS
    return {row.id: row for row in conn.execute(stmt, {"ids": sorted(set(run_ids))})}


# Built once (each runs for every batch): the write door's owners and segments of the batch's runs.
_OWNERS: Final = (select(RUNS.c.id, RUNS.c.project_id, RUNS.c.commands_pending)
                  .where(RUNS.c.id.in_(bindparam("ids", expanding=True))))
_SEGMENTS_OF: Final = select(SEGMENTS.c.run_id, SEGMENTS.c.uid).where(SEGMENTS.c.run_id.in_(bindparam("ids", expanding=True)))

# Built once (they run for every batch, twice): SQLite's write lock is the caller's, taken first.
_READ_RUNS: Final = (
    select(RUNS.c.id, RUNS.c.project_id, RUNS.c.version, RUNS.c.status, RUNS.c.last_step, RUNS.c.last_values,
           RUNS.c.heartbeat_at, RUNS.c.block)
    .where(RUNS.c.id.in_(bindparam("ids", expanding=True)))
    .order_by(RUNS.c.id)
)
_LOCK_RUNS: Final = _READ_RUNS.with_for_update()


def take_write_lock(conn: Connection) -> None:
    """On SQLite, start the write transaction now so reads and writes see one state.

    pysqlite opens a transaction only at the first write; a no-op UPDATE makes
    that happen before we read run state (PostgreSQL uses row locks instead).
    """
    if is_sqlite(conn):
        noop_write(conn)


def register_runs(
    session: Session, project_id: int, events: Sequence[dict[str, Any]], *, received_at: float | None = None
) -> int:
    """Create the runs and segments of the batch's run_started events; returns segments made.

    Idempotent. Segment indexes count segments in creation order per run; the run
    row is locked first, so two writers never pick the same index.
    """
    started = started_segments(events)
    if not started:
        return 0
    conn = session.connection()
    now = received_at if received_at is not None else time.time()
    take_write_lock(conn)
    firsts: dict[str, dict[str, Any]] = {}
    for (run, _), i in sorted(started.items()):
        e = events[i]
        if run not in firsts or e["ts"] < firsts[run]["ts"]:
            firsts[run] = e
    rows = [
        {
            "id": run,
            "project_id": project_id,
            "name": e["name"],
            "visibility": e["visibility"],
            "public_paths": e.get("public_paths", False),
            "status": "running",
            "config": e["config"],
            "group_name": e.get("group"),
            "job_type": e.get("job_type"),
            "notes": e.get("notes"),
            "code": e["code"],
            "env": e["env"],
            "seed": e["seed"],
            "created_at": now,
            "started_at": e["ts"],
            "finished_at": None,
            "heartbeat_at": None,
            "last_step": None,
            "last_values": {},
            "version": 0,
        }
        for run, e in sorted(firsts.items())
    ]
    conn.execute(upsert(conn, RUNS).on_conflict_do_nothing(index_elements=["id"]), rows)
    lock_runs(conn, firsts)
    write_tags(conn, [events[i] for i in sorted(started.values())])
    record_initial(conn, {run: e["policy"] for run, e in firsts.items() if e.get("policy")}, now)
    existing = {
        (r, u)
        for r, u in conn.execute(
            select(SEGMENTS.c.run_id, SEGMENTS.c.uid).where(SEGMENTS.c.run_id.in_(sorted(firsts)))
        ).all()
    }
    # New segments in the order the trainer opened them (ts, then seq).
    new = sorted(
        (events[i] for key, i in started.items() if key not in existing),
        key=lambda e: (e["run"], e["ts"], e["seq"], e["segment"]),
    )
    made = 0
    for e in new:
        next_index = (
            select(SEGMENTS.c.index + 1).where(SEGMENTS.c.run_id == e["run"]).order_by(SEGMENTS.c.index.desc()).limit(1)
        ).scalar_subquery()
        index = conn.execute(select(next_index)).scalar() or 0
        resume = e["resume_step"]
        result = conn.execute(
            upsert(conn, SEGMENTS)
            .values(
                run_id=e["run"],
                uid=e["segment"],
                index=index,
                start_step=resume or 0,
                resumed=resume is not None,
                started_at=e["ts"],
            )
            .on_conflict_do_nothing(index_elements=["run_id", "uid"])
        )
        made += result.rowcount or 0
    return made
