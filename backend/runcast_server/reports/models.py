"""The report tables: reports and every version of their text (migration 0024), and the notices of
their publication to subscriptions (migration 0025)."""

from __future__ import annotations

from sqlalchemy import (
    BigInteger,
    Boolean,
    Float,
    ForeignKey,
    Integer,
    String,
    Text,
    UniqueConstraint,
    delete,
    false,
    select,
)
from sqlalchemy.orm import Mapped, Session, mapped_column

from runcast_server.core.models import Base, BigId

STATES = ("draft", "published")


class Report(Base):
    """One report of a run, numbered per run (``number``: its address, /runs/{id}/reports/{n}).

    ``version`` is the newest version's number; ``published_version`` the one the public reads
    (None while the report is a draft or after it was unpublished)."""

    __tablename__ = "reports"
    __table_args__ = (UniqueConstraint("run_id", "number", name="uq_reports_run_id_number"),)

    id: Mapped[int] = mapped_column(BigId, primary_key=True)
    run_id: Mapped[str] = mapped_column(String(64), ForeignKey("runs.id", ondelete="CASCADE"))
    number: Mapped[int] = mapped_column(Integer)
    state: Mapped[str] = mapped_column(String(16), default="draft")
    version: Mapped[int] = mapped_column(Integer, default=1)
    published_version: Mapped[int | None] = mapped_column(Integer)
    published_at: Mapped[float | None] = mapped_column(Float)
    created_at: Mapped[float] = mapped_column(Float)
    updated_at: Mapped[float] = mapped_column(Float)


class ReportVersion(Base):
    """One version of a report's text: every edit writes a new one; none is changed afterwards.
    ``author_id`` NULL: written with a team token (``team`` is then true)."""

    __tablename__ = "report_versions"
    __table_args__ = (UniqueConstraint("report_id", "version", name="uq_report_versions_report_id_version"),)

    id: Mapped[int] = mapped_column(BigId, primary_key=True)
    report_id: Mapped[int] = mapped_column(BigInteger, ForeignKey("reports.id", ondelete="CASCADE"), index=True)
    version: Mapped[int] = mapped_column(Integer)
    title: Mapped[str] = mapped_column(String(200))
    body: Mapped[str] = mapped_column(Text)  # the Markdown source, live blocks included
    from_step: Mapped[int] = mapped_column(BigInteger)
    to_step: Mapped[int] = mapped_column(BigInteger)
    author_id: Mapped[int | None] = mapped_column(Integer, ForeignKey("users.id", ondelete="SET NULL"))
    team: Mapped[bool] = mapped_column(Boolean, default=False, server_default=false())
    created_at: Mapped[float] = mapped_column(Float)


class ReportDelivery(Base):
    """One notice of a report's publication to one subscription (migration 0025): sent at most
    once per report; a later version, or publishing it again, sends nothing more (reports/notices.py)."""

    __tablename__ = "report_deliveries"
    __table_args__ = (UniqueConstraint("subscription_id", "report_id", name="uq_report_deliveries_key"),)

    id: Mapped[int] = mapped_column(BigId, primary_key=True)
    subscription_id: Mapped[int] = mapped_column(ForeignKey("subscriptions.id", ondelete="CASCADE"))
    report_id: Mapped[int] = mapped_column(ForeignKey("reports.id", ondelete="CASCADE"), index=True)
    status: Mapped[str] = mapped_column(String(16), default="pending")  # pending | sent | failed | dropped
    attempts: Mapped[int] = mapped_column(Integer, default=0)
    last_error: Mapped[str | None] = mapped_column(String(500))
    created_at: Mapped[float] = mapped_column(Float)
    sent_at: Mapped[float | None] = mapped_column(Float)


def delete_run_report_rows(session: Session, run_id: str) -> None:
    """The versions of a run's reports and their notices (no ``run_id`` of their own; ``tables.delete_run``)."""
    ids = select(Report.id).where(Report.run_id == run_id).scalar_subquery()
    session.execute(delete(ReportDelivery).where(ReportDelivery.report_id.in_(ids)))
    session.execute(delete(ReportVersion).where(ReportVersion.report_id.in_(ids)))
