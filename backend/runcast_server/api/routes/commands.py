"""``POST /runs/{run_id}/commands`` (the team sends a command to the live trainer) and ``GET
/runs/{run_id}/commands`` (the run's commands and what became of them: a public read under the
run's publication policy). docs/commands.md."""

from __future__ import annotations

import time
from typing import Annotated

from fastapi import APIRouter, Depends, Request
from sqlalchemy.orm import Session

from runcast_server.api.deps import ContextDep, SessionDep, TeamDep, TokenDep
from runcast_server.api.read_deps import RUN_ERRORS, ReadableRunDep, SettingsDep, ViewDep
from runcast_server.commands import record, service
from runcast_server.commands.schemas import CommandList, CommandOut, CommandRequest
from runcast_server.core.auth import token_grant
from runcast_server.core.errors import NotFound, error_responses
from runcast_server.core.models import IngestToken
from runcast_server.record.models import Run
from runcast_server.runs import manage
from runcast_server.sessions.service import COOKIE, lookup

router = APIRouter(tags=["commands"])


def _sender(request: Request, session: Session, token: str | None) -> tuple[str, str]:
    """Who sends (as the record names them): a token's label (else its prefix), or a person's display name."""
    if token is not None:
        grant = token_grant(session, token)
        stored = session.get(IngestToken, grant.token_id) if grant is not None else None
        return (stored.label or f"token {stored.prefix}…" if stored is not None else "a token"), "token"
    found = lookup(session, request.cookies.get(COOKIE))
    user = found.user if found is not None else None
    return (user.display_name if user is not None else "a member"), "person"


def _team_run(session: SessionDep, project: TeamDep, run_id: str) -> Run:
    """The run, if the team's project holds it: a 404 for another project's run or an unknown id,
    before the body is read (as every write route answers)."""
    return manage.owned_run(session, run_id, project)


TeamRunDep = Annotated[Run, Depends(_team_run)]


@router.post("/runs/{run_id}/commands", status_code=201, response_model=CommandOut,
             responses=error_responses(401, 403, 404, 409, 422))
def send_command(request: Request, session: SessionDep, ctx: ContextDep, settings: SettingsDep, run: TeamRunDep,
                 token: TokenDep, run_id: str, body: CommandRequest) -> CommandOut:
    """Send ``stop``, ``checkpoint``, ``pause``, ``resume`` or ``set`` (a declared tunable, within its
    bounds) to the run's live trainer: a ``team`` token, or a member's or owner's session. 409 for a
    finished run; nothing is written on any error."""
    sender, kind = _sender(request, session, token)
    command = service.send(session, run, body.kind, body.reason, name=body.name, value=body.value, sender=sender,
                           sender_kind=kind, expire_s=settings.command_expire_s, now=time.time())
    out = CommandOut(**record.payload(command))
    session.commit()
    ctx.hub.publish(run.id, record.notice(run.id, command.uid, "sent"))
    return out


@router.get("/runs/{run_id}/commands", response_model=CommandList, responses=RUN_ERRORS)
def list_commands(session: SessionDep, found: ReadableRunDep, view: ViewDep) -> CommandList:
    """The run's commands, oldest first: who sent each, when, why, and what the trainer did. A public
    reader sees none when the run's policy withholds commands, and none sent within its broadcast delay."""
    run: Run = found[0]
    if not view.event_shown("command"):
        raise NotFound("commands", field="commands")
    rows = service.listed(session, run)
    until = view.until
    out = [record.payload(c) for c in rows if until is None or c.created_at <= until]
    for entry in out:  # a delayed reader sees what was known ``delay_s`` ago
        if until is not None and (entry["acked_at"] or 0) > until:
            entry.update(state="delivered", step=None, outcome=None, message=None, acked_at=None)
    return CommandList(run=run.id, commands=[CommandOut(**e) for e in out])
