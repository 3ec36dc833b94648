"""The trainer's ``command_ack`` events, checked when a batch is accepted (a forged, replayed or late
acknowledgement refuses the batch, naming the event) and applied in the same transaction."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from sqlalchemy import select
from sqlalchemy.orm import Session

from runcast_server.commands import record
from runcast_server.commands.models import OPEN, Command
from runcast_server.core.errors import ApiError


def _acks(events: Sequence[dict[str, Any]]) -> list[tuple[int, dict[str, Any]]]:
    return [(i, e) for i, e in enumerate(events) if e["type"] == "command_ack"]


def check(session: Session, events: Sequence[dict[str, Any]], now: float) -> dict[str, Command]:
    """The commands the batch's acknowledgements name (runs already checked as the project's).

    404 ``command`` for an id the event's run never received, 409 for one already acknowledged
    by another event (a replay) or expired. The same event sent again passes (and changes nothing)."""
    acks = _acks(events)
    if not acks:
        return {}
    uids = sorted({e["command"] for _, e in acks})
    found = {c.uid: c for c in session.scalars(select(Command).where(Command.uid.in_(uids)))}
    seen: set[str] = set()
    for i, e in acks:
        command = found.get(e["command"])
        if command is None or command.run_id != e["run"]:
            raise ApiError(404, f"unknown command {e['command']!r} for run {e['run']!r}", field="command", index=i)
        same_event = (command.ack_segment, command.ack_seq) == (e["segment"], e["seq"])
        if command.state == "acknowledged" and not same_event or e["command"] in seen:
            raise ApiError(409, f"command {command.uid} was already acknowledged (at step {command.step})",
                           field="command", index=i)
        if command.state == "expired" or command.state in OPEN and command.expires_at <= now:
            raise ApiError(409, f"command {command.uid} expired before it was acknowledged", field="command", index=i)
        seen.add(e["command"])
    return found


def apply(session: Session, events: Sequence[dict[str, Any]], commands: dict[str, Command], now: float) -> None:
    """Record each new acknowledgement on its command and on the run's timeline (a run version each:
    the runs' rows are taken in id order, as a stored batch takes them)."""
    for _, e in sorted(_acks(events), key=lambda ack: (ack[1]["run"], ack[0])):
        command = commands[e["command"]]
        if command.state == "acknowledged":
            continue  # the same event again
        command.state, command.acked_at, command.step = "acknowledged", now, e["step"]
        command.outcome, command.message = e["outcome"], e["message"] or None
        command.ack_segment, command.ack_seq = e["segment"], e["seq"]
        session.flush()
        record.write(session, command, record.RESOLVED, e["step"], now)
