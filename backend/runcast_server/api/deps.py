"""Request dependencies: one database session per request, committed once, and auth."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Annotated

from fastapi import Depends, Query, Request
from fastapi.responses import Response
from fastapi.security import HTTPBearer
from sqlalchemy.orm import Session

from runcast_server.alerts import ratelimit
from runcast_server.context import AppContext
from runcast_server.core.auth import is_admin_token, project_for_token
from runcast_server.core.errors import ApiError, error_body, error_response, request_language
from runcast_server.core.models import Project
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


SessionDep = Annotated[Session, Depends(get_session)]


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


# Methods a dashboard session cookie counts on: reads only, so a cookie never authorises a write.
SESSION_METHODS = ("GET", "HEAD")


def session_viewer(session: Session, method: str, cookie: str | None) -> Project | None:
    """The project of the browser's live dashboard session (sessions/), for a read; else None
    (a stale or unknown cookie is an anonymous reader, never an error)."""
    if method not in SESSION_METHODS:
        return None
    found = lookup_session(session, cookie)
    return None if found is None else found.project


def viewer_project(request: Request, session: SessionDep, token: TokenDep) -> Project | None:
    """The project whose token the caller presented or, without a token, whose dashboard session
    cookie a GET or HEAD carries (reads: optional; grants private runs)."""
    if token is None:
        return session_viewer(session, request.method, request.cookies.get(SESSION_COOKIE))
    project = project_for_token(session, token, touch=True)
    if project is None:
        raise ApiError(401, "invalid or revoked token", field="Authorization")
    return project


def writer_project(session: SessionDep, token: TokenDep) -> Project:
    """The project a write is authorised for; a missing or bad token is a 401."""
    if token is None:
        raise ApiError(401, "a project ingest token is required (Authorization: Bearer <token>)", field="Authorization")
    project = project_for_token(session, token, touch=True)
    if project is None:
        raise ApiError(401, "invalid or revoked token", field="Authorization")
    return project


ViewerDep = Annotated[Project | None, Depends(viewer_project)]
WriterDep = Annotated[Project, Depends(writer_project)]


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
    return error_response(429, error_body(message), headers={"Retry-After": str(int(wait) + 1)})
