"""The public record of commands: one ``command`` timeline event when a command is sent and one
when it is resolved (acknowledged or expired), on the run's newest segment. Their ``seq`` is
negative (like an alert's ``anomaly``), far below the alerts' range, so it never meets an SDK's.

Each event is a version of the run of its own (``runs.versions``), as an alert's is: the stream's
and the broadcast's message of that version carry it, so a page following the run through a cache
(docs/live.md) gets the decision as a page on the stream does."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Final

from sqlalchemy import select, update
from sqlalchemy.orm import Session

from runcast_server.commands.models import Command
from runcast_server.core.db import upsert
from runcast_server.record.models import Event, Run, Segment
from runcast_server.runs.versions import RunChange, write_version_log

SEQ_BASE: Final = 2**50
SENT, RESOLVED = 0, 1


def payload(command: Command) -> dict[str, Any]:
    """What the timeline (and ``GET /runs/{id}/commands``) publishes of a command."""
    return {"command": command.uid, "kind": command.kind, "name": command.name, "value": command.value,
            "reason": command.reason, "sender": command.sender, "state": command.state, "step": command.step,
            "outcome": command.outcome, "message": command.message, "created_at": command.created_at,
            "expires_at": command.expires_at, "acked_at": command.acked_at}


def notice(run_id: str, command: str, change: str) -> dict[str, Any]:
    """The live hub's message once a command's change is committed (``sent``, ``resolved``,
    ``expired``): every open page of the run reads its commands and timeline again (live/frames.py)."""
    return {"run": run_id, "commands": {"id": command, "change": change}}


def write(session: Session, command: Command, phase: int, step: int | None, now: float) -> None:
    """The ``command`` event of ``phase`` (SENT or RESOLVED), once, as the run's next version.

    The version is taken by one ``UPDATE ... RETURNING`` (PostgreSQL: the run's row lock, as the
    ingest's; SQLite: the write transaction), so it never meets a batch's."""
    segment = session.scalar(select(Segment.id).where(Segment.run_id == command.run_id)
                             .order_by(Segment.index.desc()).limit(1))
    if segment is None:
        return
    conn = session.connection()
    runs = Run.__table__.c
    run = conn.execute(update(Run.__table__).where(runs.id == command.run_id).values(version=runs.version + 1)
                       .returning(runs.version, runs.status, runs.last_step)).one()
    table = Event.__table__
    event_id = conn.execute(
        upsert(conn, table)
        .values(run_id=command.run_id, segment_id=segment, seq=-(SEQ_BASE + 2 * command.id + phase), type="command",
                step=step, ts=now, received_at=now, version=run.version, payload=payload(command))
        .on_conflict_do_nothing(index_elements=["segment_id", "seq"])
        .returning(table.c.id)
    ).scalar()
    change = RunChange(run=command.run_id, version=run.version, changed=True, status=run.status,
                       last_step=run.last_step, events=["command"] if event_id is not None else [],
                       event_ids=[event_id] if event_id is not None else [])
    write_version_log(conn, _Version({command.run_id: change}))


@dataclass
class _Version:
    """One run's change, as ``write_version_log`` takes changes (``runs.versions.Changes``)."""

    runs: dict[str, RunChange]
