"""Dependencies of the read routes: settings, and the run named in the path if the caller may read it."""

from __future__ import annotations

from typing import Annotated

from fastapi import Depends, Path, Query, Request
from runcast.wire.events import ID_RE

from runcast_server.api.deps import SessionDep, ViewerDep
from runcast_server.artifacts.storage import Storage
from runcast_server.core.errors import NotFound, error_responses
from runcast_server.core.settings import Settings
from runcast_server.policy.apply import View, view_for
from runcast_server.reads.access import readable_run
from runcast_server.reads.cursor import NEXT_ID
from runcast_server.reads.published import sees_everything
from runcast_server.record.models import Run


def app_settings(request: Request) -> Settings:
    """The settings the app was built with (its context's)."""
    return request.app.state.context.settings


SettingsDep = Annotated[Settings, Depends(app_settings)]


def app_storage(request: Request) -> Storage:
    """The checkpoint storage of the app's context (built once, with it)."""
    return request.app.state.context.storage


StorageDep = Annotated[Storage, Depends(app_storage)]


def readable_run_dep(
    session: SessionDep,
    viewer: ViewerDep,
    run_id: Annotated[str, Path(description="The run id.", max_length=64)],
) -> tuple[Run, str]:
    """The run and its project's name; 404 when missing or hidden from the caller."""
    if not ID_RE.match(run_id):
        raise NotFound("run", field="run")
    return readable_run(session, run_id, viewer)


ReadableRunDep = Annotated[tuple[Run, str], Depends(readable_run_dep)]

# The errors of every route that reads one run: a bad token, a run missing or hidden, a bad parameter.
RUN_ERRORS = error_responses(401, 404, 422)


def full_view_dep(found: ReadableRunDep, viewer: ViewerDep) -> bool:
    """Whether the caller sees the run's paths, host and pid (reads/published.py)."""
    return sees_everything(found[0], viewer)


FullViewDep = Annotated[bool, Depends(full_view_dep)]


def after_dep(
    after: Annotated[str | None, Query(pattern=NEXT_ID, description="next_cursor of the previous page.")] = None,
) -> int | None:
    """``?after=``: the id a page continues after (the pattern, checked by FastAPI, keeps it an integer)."""
    return None if after is None else int(after)


AfterDep = Annotated[int | None, Depends(after_dep)]


def view_dep(session: SessionDep, found: ReadableRunDep, viewer: ViewerDep) -> View:
    """What the run's publication policy shows the caller (policy/apply.py; the team: everything)."""
    return view_for(session, found[0], viewer)


ViewDep = Annotated[View, Depends(view_dep)]
