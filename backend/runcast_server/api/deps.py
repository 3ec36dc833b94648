"""Request dependencies: one database session per request, committed once, and auth."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Annotated

from fastapi import Depends, Query, Request
from fastapi.responses import Response
from fastapi.security import HTTPBearer
from sqlalchemy.orm import Session

from runcast_server.alerts import ratelimit
from runcast_server.api import access
from runcast_server.context import AppContext
from runcast_server.core.auth import Grant, is_admin_token, project_for_token, token_grant
from runcast_server.core.errors import VARY, ApiError, error_body, error_response, localized, request_language
from runcast_server.core.models import Project
from runcast_server.people.models import User
from runcast_server.sessions.service import COOKIE as SESSION_COOKIE
from runcast_server.sessions.service import lookup as lookup_session


def reader_language(
    request: Request,
    response: Response,
    lang: Annotated[str | None, Query(max_length=35, description="Language of the text (en, zh-CN); default: "
                                      "from Accept-Language, else English.")] = None,
) -> str:
    """The language the reader asked for (``?lang=``, else ``Accept-Language``); the answer varies with it."""
    response.headers["Vary"] = "Accept-Language"
    return request_language(request)


LanguageDep = Annotated[str, Depends(reader_language)]


def app_context(request: Request) -> AppContext:
    """The application context the app's lifespan started (``runcast_server.context``)."""
    return request.app.state.context


ContextDep = Annotated[AppContext, Depends(app_context)]


def get_session(request: Request) -> Iterator[Session]:
    with request.app.state.context.database.scope() as session:
        yield session


# scope="function": the commit runs when the route returns, before the response is sent, so that a
# 2xx means stored (FastAPI's default runs a yield dependency's exit after the response is sent).
SessionDep = Annotated[Session, Depends(get_session, scope="function")]


class BearerToken(HTTPBearer):
    """The token of an ``Authorization: Bearer <token>`` header, if any (401 for any other
    form). Declared in OpenAPI as the ``bearer`` security scheme."""

    # The override returns the token itself, not HTTPBearer's credentials object (the
    # subclass is kept for its OpenAPI security scheme; every dependant wants the string).
    async def __call__(self, request: Request) -> str | None:  # type: ignore[override]
        authorization = request.headers.get("authorization")
        if not authorization:
            return None
        scheme, _, token = authorization.partition(" ")
        if scheme.lower() != "bearer" or not token.strip():
            raise ApiError(401, "Authorization header must be 'Bearer <token>'", field="Authorization")
        return token.strip()


bearer_token = BearerToken(
    scheme_name="bearer",
    auto_error=False,
    description="A project token (`runcast token create`): required for writes; on reads it shows "
    "that project's private and unlisted runs. The /admin routes take an admin token instead "
    "(`runcast token create --admin`).",
)
TokenDep = Annotated[str | None, Depends(bearer_token)]


# Methods a project token's dashboard session counts on: reads only, so such a cookie never writes.
SESSION_METHODS = access.READ_METHODS


def session_viewer(session: Session, method: str, cookie: str | None, *, request: Request | None = None,
                   run_id: str | None = None) -> Project | None:
    """The project the browser's live dashboard session reads (sessions/), for a read; else None
    (a stale or unknown cookie is an anonymous reader, never an error). A person's session reads
    the project the request is about (``request``'s target, or run ``run_id``'s) if the person has
    a role there."""
    if method not in SESSION_METHODS:
        return None
    found = lookup_session(session, cookie)
    if found is None or found.user is None:
        return None if found is None else found.project
    about = access.run_project(session, run_id) if run_id is not None else (
        access.target_project(session, request) if request is not None else None)
    return access.person_reads(session, found.user, about)


def _grant(session: Session, token: str) -> Grant:
    grant = token_grant(session, token, touch=True)
    if grant is None:
        raise ApiError(401, "invalid or revoked token", field="Authorization")
    return grant


def token_reader(session: Session, token: str) -> Project:
    """The project of a token with the ``read`` scope (401 for a bad token, 403 without the scope)."""
    return access.check_scope(_grant(session, token), "read")


def viewer_project(request: Request, session: SessionDep, token: TokenDep) -> Project | None:
    """The project whose token (with the ``read`` scope) the caller presented or, without a token,
    whose dashboard session cookie a GET or HEAD carries (reads: optional; grants private runs)."""
    if token is None:
        return session_viewer(session, request.method, request.cookies.get(SESSION_COOKIE), request=request)
    return token_reader(session, token)


def token_grant_dep(session: SessionDep, token: TokenDep) -> Grant:
    """The presented project token's project and scopes; a missing or bad token is a 401."""
    if token is None:
        raise ApiError(401, "a project token is required (Authorization: Bearer <token>)", field="Authorization")
    return _grant(session, token)


def _acting(request: Request, session: Session, token: str | None, scope: str) -> Project:
    """The project a request needing ``scope`` acts on: a token's (if it has the scope) or a signed-in
    person's target project (if the role allows it); 401 for anyone else (a project token's session included)."""
    if token is not None:
        return access.check_scope(_grant(session, token), scope)
    found = lookup_session(session, request.cookies.get(SESSION_COOKIE))
    if found is not None and found.user is not None and scope != "ingest":
        return access.person_acts(session, found.user, request, scope)
    raise ApiError(401, "a project token is required (Authorization: Bearer <token>)", field="Authorization")


def require_read(request: Request, session: SessionDep, token: TokenDep) -> Project:
    """A route for the project's readers: a token with ``read`` or a person with a role."""
    return _acting(request, session, token, "read")


def require_ingest(request: Request, session: SessionDep, token: TokenDep) -> Project:
    """A trainer's route: a token with ``ingest`` (no session ever ingests)."""
    return _acting(request, session, token, "ingest")


def require_team(request: Request, session: SessionDep, token: TokenDep) -> Project:
    """A route that manages the project: a token with ``team``, or a member's or owner's session."""
    return _acting(request, session, token, "team")


def require_team_token(session: SessionDep, token: TokenDep) -> Project:
    """Token management: a token with ``team`` (no browser session manages tokens)."""
    return access.check_scope(token_grant_dep(session, token), "team")


def signed_in_person(request: Request, session: SessionDep) -> User | None:
    """The person whose session cookie the request carries; None for anyone else (anonymous, a
    project token's session, a stale cookie)."""
    found = lookup_session(session, request.cookies.get(SESSION_COOKIE))
    return None if found is None else found.user


PersonDep = Annotated[User | None, Depends(signed_in_person)]
ViewerDep = Annotated[Project | None, Depends(viewer_project)]
ReaderDep = Annotated[Project, Depends(require_read)]
IngestDep = Annotated[Project, Depends(require_ingest)]
TeamDep = Annotated[Project, Depends(require_team)]
GrantDep = Annotated[Grant, Depends(token_grant_dep)]
TeamTokenDep = Annotated[Project, Depends(require_team_token)]
# The dependencies that refuse a request without credentials (OpenAPI marks their routes' security).
CREDENTIALS_REQUIRED = (require_read, require_ingest, require_team, require_team_token, token_grant_dep)


def admin(session: SessionDep, token: TokenDep) -> None:
    """Only an admin token (``runcast token create --admin``) passes: 401 without one, 403 for a project token."""
    if token is None:
        raise ApiError(401, "an admin token is required (Authorization: Bearer <admin token>)", field="Authorization")
    if is_admin_token(session, token):
        return
    if project_for_token(session, token) is not None:
        raise ApiError(403, "a project token cannot use the admin routes", field="Authorization")
    raise ApiError(401, "invalid or revoked token", field="Authorization")


AdminDep = Depends(admin)


def client_ip(request: Request) -> str:
    """The address the request came from, as the ASGI server reports it ("unknown" without one)."""
    return request.client.host if request.client else "unknown"


def over_rate_limit(request: Request, session: Session, action: str, limit: int, window_s: int,
                    message: str) -> Response | None:
    """Count one ``action`` from the client's address; None while under ``limit`` per ``window_s``,
    else the 429 to answer (with Retry-After). The count is committed even for a refused request:
    the attempt is what the limit counts."""
    wait = ratelimit.hit(session, f"{action}:{client_ip(request)}", limit, window_s)
    if wait is None:
        return None
    session.commit()
    return error_response(429, localized(request, error_body(message)), headers={"Retry-After": str(int(wait) + 1), **VARY})
