"""Accounts, sign-in by password or by an OpenID Connect identity, and roles in projects.

A role grants what a project token's scopes would (``ROLE_SCOPES``): a viewer reads the project's
private runs, a member or an owner also manages its runs (``team``); only an owner manages the
members. No role ever grants ``ingest``: a trainer uses a token.
"""

from __future__ import annotations

import re
import secrets
import time
from typing import Any

from sqlalchemy import select
from sqlalchemy.orm import Session

from runcast_server.core.models import Project
from runcast_server.people import passwords
from runcast_server.people.models import ROLES, Identity, Membership, User

ROLE_SCOPES: dict[str, tuple[str, ...]] = {
    "owner": ("read", "team"), "member": ("read", "team"), "viewer": ("read",),
}
NAME_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,99}$")


class PeopleError(ValueError):
    """A refused change, with the field (or CLI argument) at fault."""

    def __init__(self, message: str, field: str) -> None:
        super().__init__(message)
        self.field = field


def _check_password(password: str) -> None:
    if not passwords.MIN_LENGTH <= len(password) <= passwords.MAX_LENGTH:
        raise PeopleError(f"a password has {passwords.MIN_LENGTH} to {passwords.MAX_LENGTH} characters", "password")


def create_user(session: Session, name: str, *, display_name: str | None = None, email: str | None = None,
                password: str | None = None) -> User:
    """A new account ``name`` (``NAME_RE``, unique); with ``password``, a local one."""
    if not NAME_RE.match(name):
        raise PeopleError("a user name is 1-100 characters of A-Z, a-z, 0-9, '.', '_' or '-'", "name")
    if session.scalar(select(User.id).where(User.name == name)) is not None:
        raise PeopleError(f"user {name!r} exists", "name")
    if password is not None:
        _check_password(password)
    user = User(name=name, display_name=(display_name or name)[:200], email=email, created_at=time.time(),
                password_hash=None if password is None else passwords.hash_password(password))
    session.add(user)
    session.flush()
    return user


def find_user(session: Session, name: str) -> User | None:
    return session.scalar(select(User).where(User.name == name))


def set_password(session: Session, user: User, password: str) -> None:
    """Give ``user`` a (new) local password."""
    _check_password(password)
    user.password_hash = passwords.hash_password(password)
    session.flush()


def authenticate(session: Session, name: str, password: str) -> User | None:
    """The local account ``name`` if ``password`` is its password; else None, after the same work
    whether or not the name exists (the answer says nothing of which was wrong)."""
    user = find_user(session, name)
    if not passwords.verify(None if user is None else user.password_hash, password):
        return None
    assert user is not None and user.password_hash is not None
    if passwords.needs_rehash(user.password_hash):
        user.password_hash = passwords.hash_password(password)
    return user


def user_for_identity(session: Session, issuer: str, claims: dict[str, Any]) -> User:
    """The user behind a verified ID token's ``claims`` from ``issuer``: found by (issuer, ``sub``),
    else made (named after ``preferred_username``, ``nickname`` or the e-mail's local part, made unique)."""
    subject = str(claims["sub"])
    found = session.scalar(select(User).join(Identity, Identity.user_id == User.id)
                           .where(Identity.issuer == issuer, Identity.subject == subject))
    if found is not None:
        return found
    email = claims.get("email") if isinstance(claims.get("email"), str) else None
    wanted = str(claims.get("preferred_username") or claims.get("nickname") or (email or "").split("@")[0] or "user")
    base = re.sub(r"[^A-Za-z0-9._-]", "-", wanted).strip(".-_")[:80] or "user"
    name = base if NAME_RE.match(base) and find_user(session, base) is None else f"{base}-{secrets.token_hex(3)}"
    display = str(claims.get("name") or wanted)
    user = create_user(session, name, display_name=display, email=email)
    session.add(Identity(user_id=user.id, issuer=issuer, subject=subject, created_at=time.time()))
    session.flush()
    return user


def grant(session: Session, project: Project, user: User, role: str) -> Membership:
    """Give ``user`` ``role`` in ``project`` (replacing the one it had)."""
    if role not in ROLES:
        raise PeopleError(f"a role is one of {', '.join(ROLES)}", "role")
    found = session.scalar(select(Membership).where(Membership.project_id == project.id,
                                                    Membership.user_id == user.id))
    if found is None:
        found = Membership(project_id=project.id, user_id=user.id, role=role, created_at=time.time())
        session.add(found)
    else:
        found.role = role
    session.flush()
    return found


def revoke(session: Session, project: Project, user: User) -> bool:
    """Take ``user``'s role in ``project`` away; whether it had one."""
    found = session.scalar(select(Membership).where(Membership.project_id == project.id,
                                                    Membership.user_id == user.id))
    if found is not None:
        session.delete(found)
        session.flush()
    return found is not None


def role_of(session: Session, user_id: int, project_id: int) -> str | None:
    """``user_id``'s role in ``project_id``, or None."""
    return session.scalar(select(Membership.role).where(Membership.project_id == project_id,
                                                        Membership.user_id == user_id))


def members(session: Session, project_id: int) -> list[tuple[User, str]]:
    """The project's people and their roles, by name."""
    rows = session.execute(select(User, Membership.role).join(Membership, Membership.user_id == User.id)
                           .where(Membership.project_id == project_id).order_by(User.name))
    return [(user, role) for user, role in rows]


def projects_of(session: Session, user_id: int) -> list[tuple[str, str]]:
    """(project name, role) of each project ``user_id`` has a role in, by name."""
    rows = session.execute(select(Project.name, Membership.role).join(Membership, Membership.project_id == Project.id)
                           .where(Membership.user_id == user_id).order_by(Project.name))
    return [(name, role) for name, role in rows]


def all_users(session: Session) -> list[User]:
    return list(session.scalars(select(User).order_by(User.name)))
