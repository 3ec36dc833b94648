"""The ``users``, ``identities`` and ``memberships`` tables (migration 0020)."""

from __future__ import annotations

from sqlalchemy import Float, ForeignKey, Integer, String, UniqueConstraint
from sqlalchemy.orm import Mapped, mapped_column

from runcast_server.core.models import Base

ROLES = ("owner", "member", "viewer")


class User(Base):
    """A person. ``name`` is the unique handle the CLI and the sign-in form use; ``password_hash``
    (argon2id, ``people.passwords``) is set only for a local account."""

    __tablename__ = "users"

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    name: Mapped[str] = mapped_column(String(100), unique=True)
    display_name: Mapped[str] = mapped_column(String(200))
    email: Mapped[str | None] = mapped_column(String(320))
    password_hash: Mapped[str | None] = mapped_column(String(200))
    created_at: Mapped[float] = mapped_column(Float)


class Identity(Base):
    """An external login of a user: the OpenID Connect issuer and the subject it vouches for."""

    __tablename__ = "identities"
    __table_args__ = (UniqueConstraint("issuer", "subject", name="uq_identities_issuer_subject"),)

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    user_id: Mapped[int] = mapped_column(ForeignKey("users.id", ondelete="CASCADE"), index=True)
    issuer: Mapped[str] = mapped_column(String(500))
    subject: Mapped[str] = mapped_column(String(255))
    created_at: Mapped[float] = mapped_column(Float)


class Membership(Base):
    """A user's role in a project: ``owner``, ``member`` or ``viewer`` (``ROLES``)."""

    __tablename__ = "memberships"
    __table_args__ = (UniqueConstraint("project_id", "user_id", name="uq_memberships_project_id_user_id"),)

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    project_id: Mapped[int] = mapped_column(ForeignKey("projects.id", ondelete="CASCADE"), index=True)
    user_id: Mapped[int] = mapped_column(ForeignKey("users.id", ondelete="CASCADE"), index=True)
    role: Mapped[str] = mapped_column(String(10))
    created_at: Mapped[float] = mapped_column(Float)
