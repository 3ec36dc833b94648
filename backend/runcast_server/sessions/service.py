"""Sign in, look up, sign out. The cookie holds 256 random bits; the table holds their SHA-256.

A session is either a project token's (``dashboard_sessions``: reads of that project, never a
write) or a person's (``user_sessions``: what the person's roles allow, ``people.service``).
Expiry is fixed (``expires_at`` = sign-in + ``RUNCAST_SESSION_TTL_S``; use does not extend it):
a stolen cookie works for a bounded time whatever its thief does. A token's session lives only
while the token it was opened with is unrevoked; a person's, while the account exists.
"""

from __future__ import annotations

import secrets
import time
from dataclasses import dataclass

from sqlalchemy import delete, select
from sqlalchemy.orm import Session

from runcast_server.core.auth import hash_token
from runcast_server.core.models import IngestToken, Project
from runcast_server.people.models import User
from runcast_server.sessions.models import DashboardSession, UserSession

COOKIE = "runcast_session"
# Readable by the page, holding no secret: "a session may be open", so that an anonymous page never
# asks GET /session (and logs no 401); the session itself stays in the HttpOnly COOKIE.
MARKER = "runcast_signed_in"


@dataclass(frozen=True)
class SignedIn:
    """A live session: its project (a token's session) or its person (a person's), and when it
    ends (epoch seconds)."""

    project: Project | None
    expires_at: float
    user: User | None = None


def sign_in(session: Session, token: str, ttl_s: float, now: float | None = None) -> tuple[str, SignedIn] | None:
    """A new session for a valid, unrevoked project token: (the cookie's value, the session); else None."""
    now = time.time() if now is None else now
    row = session.execute(
        select(Project, IngestToken.id)
        .join(IngestToken, IngestToken.project_id == Project.id)
        .where(IngestToken.token_hash == hash_token(token), IngestToken.revoked_at.is_(None))
    ).one_or_none()
    if row is None:
        return None
    project, token_id = row
    # The project's ended sessions go when a new one begins (an index lookup, no sweeper).
    session.execute(delete(DashboardSession).where(
        DashboardSession.project_id == project.id, DashboardSession.expires_at <= now))
    secret = secrets.token_urlsafe(32)
    stored = DashboardSession(session_hash=hash_token(secret), project_id=project.id, token_id=token_id,
                              created_at=now, expires_at=now + ttl_s)
    session.add(stored)
    session.flush()
    return secret, SignedIn(project, stored.expires_at)


def sign_in_user(session: Session, user: User, ttl_s: float, now: float | None = None) -> tuple[str, SignedIn]:
    """A new session for a person who proved who they are: (the cookie's value, the session)."""
    now = time.time() if now is None else now
    session.execute(delete(UserSession).where(UserSession.user_id == user.id, UserSession.expires_at <= now))
    secret = secrets.token_urlsafe(32)
    stored = UserSession(session_hash=hash_token(secret), user_id=user.id, created_at=now, expires_at=now + ttl_s)
    session.add(stored)
    session.flush()
    return secret, SignedIn(None, stored.expires_at, user)


def lookup(session: Session, secret: str | None, now: float | None = None) -> SignedIn | None:
    """The live session the cookie value names: unexpired, its token unrevoked; else None."""
    if not secret:
        return None
    now = time.time() if now is None else now
    person = session.execute(
        select(User, UserSession.expires_at).join(UserSession, UserSession.user_id == User.id)
        .where(UserSession.session_hash == hash_token(secret), UserSession.expires_at > now)
    ).one_or_none()
    if person is not None:
        return SignedIn(None, person[1], person[0])
    row = session.execute(
        select(Project, DashboardSession.expires_at)
        .join(DashboardSession, DashboardSession.project_id == Project.id)
        .join(IngestToken, IngestToken.id == DashboardSession.token_id)
        .where(DashboardSession.session_hash == hash_token(secret), DashboardSession.expires_at > now,
               IngestToken.revoked_at.is_(None))
    ).one_or_none()
    return None if row is None else SignedIn(row[0], row[1])


def sign_out(session: Session, secret: str | None) -> None:
    """Delete the session the cookie value names (nothing when there is none)."""
    if secret:
        session.execute(delete(DashboardSession).where(DashboardSession.session_hash == hash_token(secret)))
        session.execute(delete(UserSession).where(UserSession.session_hash == hash_token(secret)))
