"""Project ingest tokens and admin tokens: created once, shown once, stored as SHA-256 only.

Tokens carry 256 bits of randomness, so a plain SHA-256 (no salt, no stretching)
is enough to make the stored hash useless to a reader of the database while
keeping verification a single indexed lookup.
"""

from __future__ import annotations

import hashlib
import secrets
import time
from collections.abc import Iterable
from dataclasses import dataclass

from sqlalchemy import select
from sqlalchemy.orm import Session

from runcast_server.core.models import AdminToken, IngestToken, Project

TOKEN_PREFIX = "rc_"
ADMIN_TOKEN_PREFIX = "rca_"
# ``last_used_at`` is written at most this often per token, so a busy trainer's requests
# do not each become a write.
TOUCH_EVERY_S = 60.0

# What a project token may do (docs/auth.md#scopes): read the project's private runs, ingest a
# trainer's record (events, uploads, blobs, the spool report), manage the team's runs (PATCH and
# DELETE runs, policies, alert configuration, tokens). A token made without ``--scope`` has all three.
SCOPES = ("read", "ingest", "team")


class BadScope(ValueError):
    """A scope that is not one of ``SCOPES`` (or none at all)."""


def parse_scopes(values: Iterable[str]) -> tuple[str, ...]:
    """``values`` (names or comma lists, e.g. ``["read,ingest"]``) as the scopes in ``SCOPES`` order."""
    named = {part.strip() for value in values for part in value.split(",") if part.strip()}
    unknown = sorted(named - set(SCOPES))
    if unknown:
        raise BadScope(f"unknown scope {unknown[0]!r}: choose among {', '.join(SCOPES)}")
    if not named:
        raise BadScope(f"give at least one scope among {', '.join(SCOPES)}")
    return tuple(s for s in SCOPES if s in named)


@dataclass(frozen=True)
class Grant:
    """What a presented project token may do: its project, its id and its scopes."""

    project: Project
    token_id: int
    scopes: tuple[str, ...]


def hash_token(token: str) -> str:
    return hashlib.sha256(token.encode()).hexdigest()


def get_or_create_project(session: Session, name: str) -> Project:
    project = session.scalar(select(Project).where(Project.name == name))
    if project is None:
        project = Project(name=name, created_at=time.time())
        session.add(project)
        session.flush()
    return project


def create_token(session: Session, project_name: str, label: str | None = None,
                 scopes: Iterable[str] = SCOPES) -> str:
    """Make a new token for ``project_name`` (created if missing) with ``scopes`` (default: all);
    returns the secret once. ``BadScope`` for a scope not in ``SCOPES``."""
    chosen = parse_scopes(scopes)
    project = get_or_create_project(session, project_name)
    token = TOKEN_PREFIX + secrets.token_urlsafe(32)
    session.add(
        IngestToken(
            project_id=project.id,
            token_hash=hash_token(token),
            prefix=token[:10],
            label=label,
            created_at=time.time(),
            scopes=",".join(chosen),
        )
    )
    session.flush()
    return token


def project_for_token(session: Session, token: str | None, *, touch: bool = False) -> Project | None:
    """The project a valid, unrevoked token belongs to, else None (whatever its scopes).

    ``touch``: record the use in the token's ``last_used_at`` (at most every ``TOUCH_EVERY_S``).
    """
    grant = token_grant(session, token, touch=touch)
    return None if grant is None else grant.project


def token_grant(session: Session, token: str | None, *, touch: bool = False) -> Grant | None:
    """The project and scopes of a valid, unrevoked project token, else None (``touch``: as
    ``project_for_token``)."""
    if not token:
        return None
    row = session.execute(
        select(Project, IngestToken)
        .join(IngestToken, IngestToken.project_id == Project.id)
        .where(IngestToken.token_hash == hash_token(token), IngestToken.revoked_at.is_(None))
    ).one_or_none()
    if row is None:
        return None
    project, stored = row
    now = time.time()
    if touch and (stored.last_used_at is None or stored.last_used_at < now - TOUCH_EVERY_S):
        stored.last_used_at = now
    return Grant(project, stored.id, tuple(stored.scopes.split(",")))


def project_tokens(session: Session, project_id: int) -> list[IngestToken]:
    """Every token of a project, revoked ones included, oldest first."""
    return list(
        session.scalars(select(IngestToken).where(IngestToken.project_id == project_id).order_by(IngestToken.id))
    )


def revoke_token(session: Session, project_id: int, token_id: int) -> IngestToken | None:
    """Revoke the project's token ``token_id`` (from then on it authenticates nothing); None if
    the project has no such token. Revoking a revoked token keeps its first ``revoked_at``."""
    stored = session.scalar(
        select(IngestToken).where(IngestToken.id == token_id, IngestToken.project_id == project_id)
    )
    if stored is not None and stored.revoked_at is None:
        stored.revoked_at = time.time()
        session.flush()
    return stored


def create_admin_token(session: Session, label: str | None = None) -> str:
    """Make a new admin token (for the ``/api/v1/admin`` routes); returns the secret once."""
    token = ADMIN_TOKEN_PREFIX + secrets.token_urlsafe(32)
    session.add(AdminToken(token_hash=hash_token(token), prefix=token[:10], label=label, created_at=time.time()))
    session.flush()
    return token


def is_admin_token(session: Session, token: str | None) -> bool:
    """Whether ``token`` is a valid, unrevoked admin token."""
    if not token:
        return False
    return session.scalar(
        select(AdminToken.id).where(AdminToken.token_hash == hash_token(token), AdminToken.revoked_at.is_(None))
    ) is not None
