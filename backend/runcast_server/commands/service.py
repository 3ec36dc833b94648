"""Sending, delivering, expiring and listing commands (docs/commands.md)."""

from __future__ import annotations

import math
import secrets
from collections.abc import Iterable
from typing import Any

from sqlalchemy import select, update
from sqlalchemy.orm import Session

from runcast_server.commands import record
from runcast_server.commands.models import OPEN, Command
from runcast_server.core.errors import ApiError
from runcast_server.record.models import Run

FINISHED = ("finished", "failed", "killed")
TUNABLES_KEY = "_tunables"  # where the SDK declares a run's tunables in its config (runcast.tunable)


def tunables(run: Run) -> dict[str, dict[str, Any]]:
    """The values the run's script declared tunable, with their bounds (``{name: {"min", "max", "default"}}``)."""
    declared = (run.config or {}).get(TUNABLES_KEY)
    return {k: v for k, v in declared.items() if isinstance(v, dict)} if isinstance(declared, dict) else {}


def check_set(run: Run, name: str | None, value: Any) -> float:
    """``value`` for tunable ``name`` of ``run``, within its bounds; else a 422 naming the field."""
    declared = tunables(run)
    if not name:
        raise ApiError(422, "a 'set' command needs the name of a tunable", field="name")
    if name not in declared:
        names = ", ".join(sorted(declared)) or "none"
        raise ApiError(422, f"{name!r} is not a tunable of this run (it declared: {names})", field="name")
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        raise ApiError(422, "a 'set' command needs a finite number as its value", field="value")
    low, high = declared[name].get("min"), declared[name].get("max")
    if isinstance(low, (int, float)) and value < low:
        raise ApiError(422, f"{name} must be at least {low:g} (the run's bound)", field="value")
    if isinstance(high, (int, float)) and value > high:
        raise ApiError(422, f"{name} must be at most {high:g} (the run's bound)", field="value")
    return float(value)


def send(session: Session, run: Run, kind: str, reason: str, *, name: str | None, value: Any, sender: str,
         sender_kind: str, expire_s: float, now: float) -> Command:
    """Record a command for ``run`` (live: 409 naming ``run`` once it finished) and flag the run."""
    if run.status in FINISHED:
        raise ApiError(409, f"run {run.id} is {run.status}: commands go to live runs only", field="run")
    if kind == "set":
        value = check_set(run, name, value)
    elif name is not None or value is not None:
        raise ApiError(422, f"only a 'set' command takes a name and a value, not {kind!r}",
                       field="name" if name is not None else "value")
    command = Command(uid="cmd_" + secrets.token_urlsafe(12), run_id=run.id, kind=kind, name=name, value=value,
                      reason=reason, sender=sender, sender_kind=sender_kind, state="pending", created_at=now,
                      expires_at=now + expire_s)
    session.add(command)
    session.flush()
    run.commands_pending = True
    record.write(session, command, record.SENT, run.last_step, now)
    return command


def expire(session: Session, now: float) -> list[Command]:
    """Mark every open command past its time as expired, each on the run's record (a version of
    its own); returns them. The periodic check calls it (alerts/stall.py): a command whose trainer
    never came back expires on time, not when something next reads the run."""
    stale = session.scalars(select(Command).where(Command.state.in_(OPEN), Command.expires_at <= now)
                            .order_by(Command.run_id, Command.id)).all()  # the runs' row locks in one order
    for command in stale:
        command.state = "expired"
        command.message = "expired before the trainer acknowledged it"
        session.flush()
        record.write(session, command, record.RESOLVED, None, now)
    return list(stale)


def deliver(session: Session, run_ids: Iterable[str], now: float) -> list[dict[str, Any]]:
    """The open commands of ``run_ids`` (runs flagged as having some) still in their time, as the
    ingest answer carries them; pending ones become delivered. A run left with none loses its flag
    (one past its time is the periodic check's to expire)."""
    ids = sorted(set(run_ids))
    if not ids:
        return []
    open_ = session.scalars(select(Command).where(Command.run_id.in_(ids), Command.state.in_(OPEN),
                                                  Command.expires_at > now).order_by(Command.id)).all()
    for command in open_:
        if command.state == "pending":
            command.state, command.delivered_at = "delivered", now
    idle = set(ids) - {c.run_id for c in open_}
    if idle:
        session.execute(update(Run).where(Run.id.in_(sorted(idle))).values(commands_pending=False))
    return [wire(c) for c in open_]


def wire(command: Command) -> dict[str, Any]:
    """A command as the trainer receives it."""
    return {"id": command.uid, "run": command.run_id, "kind": command.kind, "name": command.name,
            "value": command.value, "reason": command.reason, "sender": command.sender,
            "created_at": command.created_at, "expires_at": command.expires_at}


def listed(session: Session, run: Run) -> list[Command]:
    """The run's commands, oldest first."""
    return list(session.scalars(select(Command).where(Command.run_id == run.id).order_by(Command.id)))
