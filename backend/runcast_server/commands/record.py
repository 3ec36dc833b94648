"""The public record of commands: one ``command`` timeline event when a command is sent and one
when it is resolved (acknowledged or expired), on the run's newest segment. Their ``seq`` is
negative (like an alert's ``anomaly``), far below the alerts' range, so it never meets an SDK's."""

from __future__ import annotations

from typing import Any, Final

from sqlalchemy import select
from sqlalchemy.orm import Session

from runcast_server.commands.models import Command
from runcast_server.core.db import upsert
from runcast_server.record.models import Event, Segment

SEQ_BASE: Final = 2**50
SENT, RESOLVED = 0, 1


def payload(command: Command) -> dict[str, Any]:
    """What the timeline (and ``GET /runs/{id}/commands``) publishes of a command."""
    return {"command": command.uid, "kind": command.kind, "name": command.name, "value": command.value,
            "reason": command.reason, "sender": command.sender, "state": command.state, "step": command.step,
            "outcome": command.outcome, "message": command.message, "created_at": command.created_at,
            "expires_at": command.expires_at, "acked_at": command.acked_at}


def write(session: Session, command: Command, phase: int, step: int | None, now: float) -> None:
    """The ``command`` event of ``phase`` (SENT or RESOLVED), once."""
    segment = session.scalar(select(Segment.id).where(Segment.run_id == command.run_id)
                             .order_by(Segment.index.desc()).limit(1))
    if segment is None:
        return
    conn = session.connection()
    table = Event.__table__
    conn.execute(
        upsert(conn, table)
        .values(run_id=command.run_id, segment_id=segment, seq=-(SEQ_BASE + 2 * command.id + phase), type="command",
                step=step, ts=now, received_at=now, version=None, payload=payload(command))
        .on_conflict_do_nothing(index_elements=["segment_id", "seq"])
    )
