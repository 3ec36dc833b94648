"""Project ingest tokens and admin tokens: created once, shown once, stored as SHA-256 only.

Tokens carry 256 bits of randomness, so a plain SHA-256 (no salt, no stretching)
is enough to make the stored hash useless to a reader of the database while
keeping verification a single indexed lookup.
"""

from __future__ import annotations

import hashlib
import secrets
import time

from sqlalchemy import select
from sqlalchemy.orm import Session

from runcast_server.models import AdminToken, IngestToken, Project

TOKEN_PREFIX = "rc_"
ADMIN_TOKEN_PREFIX = "rca_"


def hash_token(token: str) -> str:
    return hashlib.sha256(token.encode()).hexdigest()


def get_or_create_project(session: Session, name: str) -> Project:
    project = session.scalar(select(Project).where(Project.name == name))
    if project is None:
        project = Project(name=name, created_at=time.time())
        session.add(project)
        session.flush()
    return project


def create_token(session: Session, project_name: str, label: str | None = None) -> str:
    """Make a new token for ``project_name`` (created if missing); returns the secret once."""
    project = get_or_create_project(session, project_name)
    token = TOKEN_PREFIX + secrets.token_urlsafe(32)
    session.add(
        IngestToken(
            project_id=project.id,
            token_hash=hash_token(token),
            prefix=token[:10],
            label=label,
            created_at=time.time(),
        )
    )
    session.flush()
    return token


def project_for_token(session: Session, token: str | None) -> Project | None:
    """The project a valid, unrevoked token belongs to, else None."""
    if not token:
        return None
    row = session.execute(
        select(Project)
        .join(IngestToken, IngestToken.project_id == Project.id)
        .where(IngestToken.token_hash == hash_token(token), IngestToken.revoked_at.is_(None))
    ).scalar_one_or_none()
    return row


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
