"""``/api/v1/session``: sign in with a project token, say who is signed in, sign out.

Cross-site requests cannot use these routes: POST and DELETE answer 403 when the browser says
the request came from another site (``Sec-Fetch-Site``, else ``Origin``), and POST takes only
``Content-Type: application/json`` (no HTML form can send it). The cookie is ``SameSite=Strict``:
the dashboard's pages are static and fetch their data with same-origin requests, which carry it,
so no cross-site request ever needs it.
"""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Depends, Request, Response
from pydantic import BaseModel, ConfigDict, Field
from sqlalchemy.orm import Session

from runcast_server.api.access import is_same_site
from runcast_server.api.deps import SessionDep, over_rate_limit
from runcast_server.api.read_deps import SettingsDep
from runcast_server.core.errors import VARY, ApiError, error_body, error_response, error_responses, localized
from runcast_server.core.settings import Settings
from runcast_server.people import service as people
from runcast_server.people.models import User
from runcast_server.sessions import service
from runcast_server.sessions.service import COOKIE, MARKER, SignedIn

router = APIRouter(tags=["session"])

class SignInBody(BaseModel):
    token: str = Field(min_length=1, max_length=200, description="A project token (`runcast token create`).")


class PasswordBody(BaseModel):
    name: str = Field(min_length=1, max_length=100, description="The account's name (`runcast user create`).")
    password: str = Field(min_length=1, max_length=1000)


class Role(BaseModel):
    project: str
    role: str = Field(description="owner, member or viewer.")


class Person(BaseModel):
    name: str
    display_name: str
    roles: list[Role] = Field(description="The projects the person has a role in.")


class SessionView(BaseModel):
    project: str | None = Field(description="A project token's session: the project whose private and unlisted runs "
                                            "this browser reads. A person's session: null.")
    user: Person | None = Field(None, description="A person's session: who is signed in and their roles.")
    expires_at: float = Field(description="When the session ends (epoch seconds; fixed at sign-in).")


def session_view(session: Session, signed_in: SignedIn) -> SessionView:
    """The answer describing a live session."""
    user = signed_in.user
    person = None if user is None else Person(
        name=user.name, display_name=user.display_name,
        roles=[Role(project=p, role=r) for p, r in people.projects_of(session, user.id)])
    project = None if signed_in.project is None else signed_in.project.name
    return SessionView(project=project, user=person, expires_at=signed_in.expires_at)


class SignedOut(BaseModel):
    """Sign-out's answer (always true: signing out without a session is not an error)."""

    model_config = ConfigDict(extra="forbid")

    signed_out: bool


def _same_origin(request: Request) -> None:
    """403 unless the browser says the request comes from this site (or no browser sent it)."""
    if not is_same_site(request):
        raise ApiError(403, "sign-in and sign-out are accepted only from this site's pages", field="Origin")


def _json_only(request: Request) -> None:
    """415 unless the body is declared JSON; a dependency, so it answers before the body is validated."""
    if request.headers.get("content-type", "").split(";")[0].strip().lower() != "application/json":
        raise ApiError(415, "send the token as JSON (Content-Type: application/json)", field="Content-Type")


def set_cookie(request: Request, response: Response, value: str, max_age: int) -> None:
    """The session cookie (HttpOnly, SameSite=Strict, Secure over HTTPS) and the page's marker."""
    secure = request.url.scheme == "https"
    response.set_cookie(COOKIE, value, max_age=max_age, path="/", httponly=True, samesite="strict", secure=secure)
    response.set_cookie(MARKER, "1", max_age=max_age, path="/", samesite="strict", secure=secure)


@router.post("/session", response_model=SessionView, responses=error_responses(400, 401, 403, 415, 422, 429),
             dependencies=[Depends(_same_origin), Depends(_json_only)])
def sign_in(request: Request, response: Response, session: SessionDep, settings: SettingsDep,
            body: SignInBody) -> Any:
    """Exchange a project token for a session cookie (HttpOnly, SameSite=Strict, Secure over HTTPS),
    and a cookie the page reads, ``runcast_signed_in=1``, which holds no secret: pages of a browser
    without it do not ask ``GET /session``.

    The cookie makes this browser's GET and HEAD requests a reader of the token's project (its
    private and unlisted runs, their stream, exports and downloads); it never authorises a write.
    The session ends at ``expires_at`` (``RUNCAST_SESSION_TTL_S`` after sign-in), at sign-out, or
    when the token is revoked. A wrong, revoked or admin token is a 401 naming ``token``.
    """
    refused = over_rate_limit(request, session, "signin", settings.signin_rate_limit, settings.signin_rate_window_s,
                              "too many sign-in attempts from this address; try again later")
    if refused is not None:
        return refused
    opened = service.sign_in(session, body.token, settings.session_ttl_s)
    if opened is None:
        session.commit()  # the attempt counts
        return error_response(401, localized(request, error_body("invalid or revoked token", field="token")), VARY)
    service.sign_out(session, request.cookies.get(COOKIE))  # the browser's previous session ends
    secret, signed_in = opened
    set_cookie(request, response, secret, int(settings.session_ttl_s))
    return session_view(session, signed_in)


@router.post("/session/password", response_model=SessionView,
             responses=error_responses(400, 401, 403, 415, 422, 429),
             dependencies=[Depends(_same_origin), Depends(_json_only)])
def sign_in_with_password(request: Request, response: Response, session: SessionDep, settings: SettingsDep,
                     body: PasswordBody) -> Any:
    """Sign in as a person with a local account (``runcast user create``): the same cookie as a
    token's sign-in, acting with the person's roles. A wrong name or password is one 401 naming
    ``password`` (nothing says which was wrong); attempts count against the sign-in rate limit."""
    refused = over_rate_limit(request, session, "signin", settings.signin_rate_limit, settings.signin_rate_window_s,
                              "too many sign-in attempts from this address; try again later")
    if refused is not None:
        return refused
    user = people.authenticate(session, body.name, body.password)
    if user is None:
        session.commit()  # the attempt counts
        return error_response(401, localized(request, error_body("wrong name or password", field="password")), VARY)
    return open_person_session(request, response, session, settings, user)


def open_person_session(request: Request, response: Response, session: Session, settings: Settings,
                        user: User) -> SessionView:
    """End the browser's previous session, open one for ``user``, set the cookie; the answer."""
    service.sign_out(session, request.cookies.get(COOKIE))
    secret, signed_in = service.sign_in_user(session, user, settings.session_ttl_s)
    set_cookie(request, response, secret, int(settings.session_ttl_s))
    return session_view(session, signed_in)


@router.get("/session", response_model=SessionView, responses=error_responses(401))
def get_session(request: Request, session: SessionDep) -> SessionView:
    """Who this browser is signed in as; 401 when it is not (no cookie, or the session ended)."""
    found = service.lookup(session, request.cookies.get(COOKIE))
    if found is None:
        raise ApiError(401, "not signed in", field=COOKIE)
    return session_view(session, found)


@router.delete("/session", response_model=SignedOut, responses=error_responses(403))
def sign_out(request: Request, response: Response, session: SessionDep) -> SignedOut:
    """Sign out: the session is deleted and the cookie cleared (also when there was none)."""
    _same_origin(request)
    service.sign_out(session, request.cookies.get(COOKIE))
    response.delete_cookie(COOKIE, path="/", httponly=True, samesite="strict", secure=request.url.scheme == "https")
    response.delete_cookie(MARKER, path="/", samesite="strict", secure=request.url.scheme == "https")
    return SignedOut(signed_out=True)
