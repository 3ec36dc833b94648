"""Reports stored and changed: every edit a new version, publish and unpublish. Callers check who
may do what (api/routes/reports.py) and render the text first (reports.blocks, 422 on a bad block)."""

from __future__ import annotations

import time
from dataclasses import dataclass

from sqlalchemy import func, select
from sqlalchemy.orm import Session

from runcast_server.people.models import User
from runcast_server.reports.models import Report, ReportVersion


@dataclass(frozen=True)
class Text:
    """What one version says."""

    title: str
    body: str
    from_step: int
    to_step: int


def create(session: Session, run_id: str, text: Text, *, author: User | None) -> tuple[Report, ReportVersion]:
    """A new draft, numbered after the run's last report."""
    number = (session.scalar(select(func.max(Report.number)).where(Report.run_id == run_id)) or 0) + 1
    now = time.time()
    report = Report(run_id=run_id, number=number, state="draft", version=1, created_at=now, updated_at=now)
    session.add(report)
    session.flush()
    return report, _version(session, report, text, author, now)


def _version(session: Session, report: Report, text: Text, author: User | None, now: float) -> ReportVersion:
    version = ReportVersion(report_id=report.id, version=report.version, title=text.title, body=text.body,
                            from_step=text.from_step, to_step=text.to_step,
                            author_id=None if author is None else author.id, team=author is None, created_at=now)
    session.add(version)
    session.flush()
    return version


def edit(session: Session, report: Report, text: Text, *, author: User | None) -> ReportVersion:
    """A new version; the public keeps reading the published one until the team publishes again."""
    now = time.time()
    report.version += 1
    report.updated_at = now
    return _version(session, report, text, author, now)


def publish(session: Session, report: Report, version: int | None = None) -> None:
    """The public reads ``version`` (default: the newest) from now on."""
    report.state, report.published_version = "published", version or report.version
    report.published_at = report.updated_at = time.time()
    session.flush()


def unpublish(session: Session, report: Report) -> None:
    report.state, report.published_version, report.updated_at = "draft", None, time.time()
    session.flush()


def find(session: Session, run_id: str, number: int) -> Report | None:
    return session.scalar(select(Report).where(Report.run_id == run_id, Report.number == number))


def version(session: Session, report: Report, number: int) -> tuple[ReportVersion, User | None] | None:
    row = session.execute(select(ReportVersion, User).outerjoin(User, User.id == ReportVersion.author_id)
                          .where(ReportVersion.report_id == report.id, ReportVersion.version == number)).first()
    return None if row is None else (row[0], row[1])


def run_reports(session: Session, run_id: str) -> list[Report]:
    return list(session.scalars(select(Report).where(Report.run_id == run_id).order_by(Report.number)))


def versions(session: Session, report: Report) -> list[ReportVersion]:
    return list(session.scalars(select(ReportVersion).where(ReportVersion.report_id == report.id)
                                .order_by(ReportVersion.version)))


def published(session: Session, run_id: str) -> list[tuple[Report, ReportVersion]]:
    """The run's published reports with the version the public reads, newest publication first."""
    rows = session.execute(select(Report, ReportVersion).join(
        ReportVersion, (ReportVersion.report_id == Report.id) & (ReportVersion.version == Report.published_version))
        .where(Report.run_id == run_id, Report.state == "published").order_by(Report.published_at.desc())).all()
    return [(r, v) for r, v in rows]
