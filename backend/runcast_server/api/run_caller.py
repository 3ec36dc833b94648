"""Who asks about one run, for the routes under ``/runs/{run_id}`` that people and tokens share
(comments, reports): the signed-in person or the token, the project they read as, and whether
they are the run's team (docs/auth.md#scopes). A run the caller may not read is 404, as unknown.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Annotated, TypeVar

from fastapi import Path, Request
from runcast.wire.events import ID_RE
from sqlalchemy.orm import Session
from starlette.concurrency import run_in_threadpool

from runcast_server.api import access
from runcast_server.api.deps import SESSION_COOKIE, session_viewer, token_grant_dep
from runcast_server.context import AppContext
from runcast_server.core.errors import ApiError, NotFound
from runcast_server.core.models import Project
from runcast_server.people.models import User
from runcast_server.reads.access import can_read
from runcast_server.record.models import Run
from runcast_server.sessions.service import lookup as lookup_session

T = TypeVar("T")

RunPath = Annotated[str, Path(max_length=64, description="The run id.")]


@dataclass(frozen=True)
class Caller:
    """Who asks about one run: the person (if signed in), the project they read as, and whether
    they are the run's team."""

    person: User | None
    reader: Project | None
    team: bool
    token: bool


def run_caller(request: Request, session: Session, token: str | None, person: User | None,
               run_id: str) -> tuple[Caller, Run]:
    """The caller and the run (404 naming ``run`` when the caller may not read it). A signed-in
    browser's write is accepted only from this site's pages (403 naming ``Origin``)."""
    if not ID_RE.match(run_id):
        raise NotFound("run", field="run")
    run = session.get(Run, run_id)
    if token is not None:
        grant = token_grant_dep(session, token)
        reader = grant.project if access.grants(grant.scopes, "read") else None
        caller = Caller(None, reader, run is not None and grant.project.id == run.project_id
                        and access.grants(grant.scopes, "team"), True)
    elif person is not None:
        if request.method not in access.READ_METHODS and not access.is_same_site(request):
            raise ApiError(403, "a signed-in browser's changes are accepted only from this site's pages", field="Origin")
        project = access.run_project(session, run_id)
        scopes = access.person_scopes(session, person, project)
        caller = Caller(person, project if access.grants(scopes, "read") else None, access.grants(scopes, "team"), False)
    else:
        reader = session_viewer(session, request.method, request.cookies.get(SESSION_COOKIE), run_id=run_id)
        caller = Caller(None, reader, False, False)
    if run is None or not can_read(run, caller.reader):
        raise NotFound("run", field="run")
    return caller, run


def require_team(caller: Caller) -> None:
    """403 unless the caller is the run's team (naming ``Authorization`` for a token, else the session)."""
    if not caller.team:
        raise ApiError(403, "only the run's team (a member or an owner, or a token with the 'team' scope) does this",
                       field="Authorization" if caller.token else SESSION_COOKIE)


async def read_in_one_hop(ctx: AppContext, request: Request, token: str | None, run_id: str,
                          work: Callable[[Session, Caller, Run], T]) -> T:
    """``work`` on the caller and the run, in one worker-thread hop with a session of its own, for a
    read a crowd's first loads make (api/one_hop.py says why)."""
    def in_thread() -> T:
        with ctx.database.scope() as session:
            found = lookup_session(session, request.cookies.get(SESSION_COOKIE))
            caller, run = run_caller(request, session, token, None if found is None else found.user, run_id)
            return work(session, caller, run)

    return await run_in_threadpool(in_thread)
