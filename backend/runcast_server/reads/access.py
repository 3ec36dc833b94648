"""Who may read which run.

Public runs are readable and listed for everyone; unlisted runs are readable by
id but listed only to their project's token holders; private runs exist only for
a token of their project. A run the caller may not read is reported as not found,
so private run ids do not leak.
"""

from __future__ import annotations

from sqlalchemy import ColumnElement, or_, select
from sqlalchemy.orm import Session

from runcast_server.core.errors import NotFound
from runcast_server.core.models import Project
from runcast_server.record.models import Run


def can_read(run: Run, viewer: Project | None) -> bool:
    if run.visibility != "private":
        return True
    return viewer is not None and viewer.id == run.project_id


def listed_to(viewer: Project | None) -> ColumnElement[bool]:
    """The SQL condition for runs that appear in the viewer's run list."""
    public = Run.visibility == "public"
    if viewer is None:
        return public
    return or_(public, Run.project_id == viewer.id)


def readable_run(
    session: Session, run_id: str, viewer: Project | None
) -> tuple[Run, str]:
    """The run and its project's name, or ``NotFound`` when it is missing or hidden from the viewer."""
    row = session.execute(
        select(Run, Project.name)
        .join(Project, Project.id == Run.project_id)
        .where(Run.id == run_id)
    ).first()
    if row is None or not can_read(row[0], viewer):
        raise NotFound("run", field="run")
    return row[0], row[1]
