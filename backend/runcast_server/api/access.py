"""Who may do what: a project token's scopes, a signed-in person's role, and the same-site rule
for browser writes (docs/auth.md#scopes).

A bearer token is checked against the scope a route needs (403 naming ``Authorization`` and the
scope when it lacks it). Without a token, a browser's session counts: a project token's session
only reads its project (as before people existed); a person's session acts in the project the
request is about (the run of the path, the project of the path, or ``?project=``) with what the
person's role there allows, and a write by a person must come from this site's pages.
"""

from __future__ import annotations

from urllib.parse import urlsplit

from fastapi import Request
from runcast.wire.events import ID_RE, PROJECT_RE
from sqlalchemy import select
from sqlalchemy.orm import Session

from runcast_server.core.auth import Grant
from runcast_server.core.errors import ApiError, NotFound
from runcast_server.core.models import Project
from runcast_server.people.models import User
from runcast_server.people.service import ROLE_SCOPES, role_of
from runcast_server.record.models import Run
from runcast_server.sessions.service import COOKIE

READ_METHODS = ("GET", "HEAD")


def grants(scopes: tuple[str, ...], scope: str) -> bool:
    """Whether ``scopes`` allow ``scope``: managing the project (``team``) includes reading it."""
    return scope in scopes or (scope == "read" and "team" in scopes)


def check_scope(grant: Grant, scope: str) -> Project:
    """The token's project if it has ``scope``; else 403 naming the header and the scope."""
    if not grants(grant.scopes, scope):
        raise ApiError(403, f"this token lacks the {scope!r} scope (it has: {', '.join(grant.scopes)}); "
                       f"make one with `runcast token create --scope {scope}`", field="Authorization")
    return grant.project


def is_same_site(request: Request) -> bool:
    """Whether the browser says the request comes from this site's pages (or no browser sent it):
    ``Sec-Fetch-Site`` when present, else an ``Origin`` whose host is the request's ``Host``."""
    site = request.headers.get("sec-fetch-site")
    if site is not None:
        return site in ("same-origin", "none")
    origin = request.headers.get("origin")
    return origin is None or urlsplit(origin).netloc == request.headers.get("host")


def run_project(session: Session, run_id: str) -> Project | None:
    """The project holding run ``run_id``, if any."""
    if not ID_RE.match(run_id):
        return None
    return session.scalar(select(Project).join(Run, Run.project_id == Project.id).where(Run.id == run_id))


def target_project(session: Session, request: Request) -> Project | None:
    """The project the request is about: its path's run's, its path's ``project``, else ``?project=``."""
    params = request.path_params
    run_id = params.get("run_id")
    if isinstance(run_id, str):
        return run_project(session, run_id)
    name = params.get("project") or request.query_params.get("project")
    if isinstance(name, str) and PROJECT_RE.match(name):
        return session.scalar(select(Project).where(Project.name == name))
    return None


def person_scopes(session: Session, user: User, project: Project | None) -> tuple[str, ...]:
    """What ``user``'s role in ``project`` allows (nothing without a role)."""
    role = None if project is None else role_of(session, user.id, project.id)
    return ROLE_SCOPES.get(role, ()) if role is not None else ()


def person_reads(session: Session, user: User, project: Project | None) -> Project | None:
    """``project`` if ``user`` may read its private runs (has a role there), else None."""
    return project if grants(person_scopes(session, user, project), "read") else None


def person_acts(session: Session, user: User, request: Request, scope: str) -> Project:
    """The project a person's session may act on with ``scope`` in this request.

    A write from another site is a 403 (``Origin``); a target the person has no role in answers as
    for another project's token (404); a role without the scope is a 403 naming the cookie.
    """
    if request.method not in READ_METHODS and not is_same_site(request):
        raise ApiError(403, "a signed-in browser's changes are accepted only from this site's pages", field="Origin")
    project = target_project(session, request)
    scopes = person_scopes(session, user, project)
    if project is None or not scopes:
        raise NotFound("run" if "run_id" in request.path_params else "project",
                       field="run" if "run_id" in request.path_params else "project")
    if not grants(scopes, scope):
        role = role_of(session, user.id, project.id)
        raise ApiError(403, f"a {role} of {project.name} cannot do this (it needs the {scope!r} scope of a member "
                       "or an owner)", field=COOKIE)
    return project
