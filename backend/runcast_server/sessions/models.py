"""The ``dashboard_sessions`` table (migration 0010): one row per signed-in browser."""

from __future__ import annotations

from sqlalchemy import Float, ForeignKey, Integer, String
from sqlalchemy.orm import Mapped, mapped_column

from runcast_server.core.models import Base


class DashboardSession(Base):
    """A signed-in browser. Only the SHA-256 of the cookie's random id is stored.

    ``token_id`` is the project token it was opened with: revoking that token (or deleting the
    project) ends the session, because a lookup joins the unrevoked token (``service.lookup``).
    """

    __tablename__ = "dashboard_sessions"

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    session_hash: Mapped[str] = mapped_column(String(64), unique=True)
    project_id: Mapped[int] = mapped_column(ForeignKey("projects.id", ondelete="CASCADE"), index=True)
    token_id: Mapped[int] = mapped_column(ForeignKey("ingest_tokens.id", ondelete="CASCADE"), index=True)
    created_at: Mapped[float] = mapped_column(Float)
    expires_at: Mapped[float] = mapped_column(Float)


class UserSession(Base):
    """A browser signed in as a person (a local account or an OpenID Connect identity, migration
    0020). The same cookie as a project token's session; only its SHA-256 is stored. What it may
    do in a project is the person's role there (``people.service.ROLE_SCOPES``)."""

    __tablename__ = "user_sessions"

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    session_hash: Mapped[str] = mapped_column(String(64), unique=True)
    user_id: Mapped[int] = mapped_column(ForeignKey("users.id", ondelete="CASCADE"), index=True)
    created_at: Mapped[float] = mapped_column(Float)
    expires_at: Mapped[float] = mapped_column(Float)
