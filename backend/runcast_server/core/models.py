"""The declarative base every domain's tables derive from, and the identity tables: projects,
their ingest tokens and the admin tokens (SQLAlchemy 2, typed). Alembic migrations are the only
way tables are made; ``runcast_server.tables`` imports every domain's for them.

Times are float seconds since the epoch (UTC): one representation on SQLite and PostgreSQL.
"""

from __future__ import annotations

from typing import Any, ClassVar

from sqlalchemy import (
    JSON,
    BigInteger,
    Float,
    ForeignKey,
    Integer,
    MetaData,
    String,
    Table,
)
from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column

NAMING_CONVENTION = {
    "ix": "ix_%(column_0_label)s",
    "uq": "uq_%(table_name)s_%(column_0_name)s",
    "ck": "ck_%(table_name)s_%(constraint_name)s",
    "fk": "fk_%(table_name)s_%(column_0_name)s_%(referred_table_name)s",
    "pk": "pk_%(table_name)s",
}

# BIGINT primary keys autoincrement on PostgreSQL; SQLite only autoincrements INTEGER.
BigId = BigInteger().with_variant(Integer(), "sqlite")


class Base(DeclarativeBase):
    # Every model here maps a Table (none maps a join or a select), so ``Model.__table__``
    # is typed as one: DeclarativeBase types it as the wider FromClause, which insert(),
    # update() and the upsert helpers refuse (the SQLAlchemy maintainers' advice, #9130).
    __table__: ClassVar[Table]
    metadata = MetaData(naming_convention=NAMING_CONVENTION)
    type_annotation_map: ClassVar[dict[Any, Any]] = {dict[str, Any]: JSON}


class Project(Base):
    __tablename__ = "projects"

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    name: Mapped[str] = mapped_column(String(100), unique=True)
    created_at: Mapped[float] = mapped_column(Float)


class IngestToken(Base):
    """A project's token. Only its SHA-256 is stored; ``prefix`` identifies it; ``scopes`` is what
    it may do, a comma list of ``read``, ``ingest`` and ``team`` (``core.auth.SCOPES``)."""

    __tablename__ = "ingest_tokens"

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    project_id: Mapped[int] = mapped_column(
        ForeignKey("projects.id", ondelete="CASCADE"), index=True
    )
    token_hash: Mapped[str] = mapped_column(String(64), unique=True)
    prefix: Mapped[str] = mapped_column(String(16))
    label: Mapped[str | None] = mapped_column(String(200))
    created_at: Mapped[float] = mapped_column(Float)
    revoked_at: Mapped[float | None] = mapped_column(Float)
    # When a request last presented it (written at most once a minute: auth.TOUCH_EVERY_S).
    last_used_at: Mapped[float | None] = mapped_column(Float)
    scopes: Mapped[str] = mapped_column(String(40), server_default="read,ingest,team")


class AdminToken(Base):
    """An operator's token for the admin routes (quarantine, inbox). Stored like ingest tokens."""

    __tablename__ = "admin_tokens"

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    token_hash: Mapped[str] = mapped_column(String(64), unique=True)
    prefix: Mapped[str] = mapped_column(String(16))
    label: Mapped[str | None] = mapped_column(String(200))
    created_at: Mapped[float] = mapped_column(Float)
    revoked_at: Mapped[float | None] = mapped_column(Float)
