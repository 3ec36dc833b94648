"""The policy tables (migration 0011): a project's default and each run's overrides."""

from __future__ import annotations

from typing import Any

from sqlalchemy import Float, ForeignKey, String
from sqlalchemy.orm import Mapped, mapped_column

from runcast_server.core.models import Base


class ProjectPolicy(Base):
    """A project's default policy (only the fields it sets; runcast.wire.policy.check_policy)."""

    __tablename__ = "project_policies"

    project_id: Mapped[int] = mapped_column(ForeignKey("projects.id", ondelete="CASCADE"), primary_key=True)
    settings: Mapped[dict[str, Any]]
    updated_at: Mapped[float] = mapped_column(Float)


class RunPolicy(Base):
    """A run's overrides of its project's default policy."""

    __tablename__ = "run_policies"

    run_id: Mapped[str] = mapped_column(String(64), ForeignKey("runs.id", ondelete="CASCADE"), primary_key=True)
    settings: Mapped[dict[str, Any]]
    updated_at: Mapped[float] = mapped_column(Float)


__all__ = ["ProjectPolicy", "RunPolicy"]
