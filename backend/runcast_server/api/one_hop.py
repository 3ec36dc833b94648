"""Reads of one run done in one worker-thread hop, for the routes a crowd polls.

FastAPI runs each sync dependency in a thread of its own hop; a session opened by one and used by
the next holds its pooled connection while the request waits for a free thread. Under a burst
(a cache's expired edge, a front page's first loads) every thread can end up waiting for a
connection that a request waiting for a thread holds, and the process stops answering. An async
route that takes ``RunReadDep`` instead does its whole read, from the caller's token to the
body, in one ``run_in_threadpool`` call that opens and closes its session inside (as the stream
route does), so no request holds a connection while it waits for a thread.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Annotated, TypeVar

from fastapi import Depends, Path, Request
from runcast.wire.events import ID_RE
from sqlalchemy.orm import Session
from starlette.concurrency import run_in_threadpool

from runcast_server.api.deps import SESSION_COOKIE, TokenDep, session_viewer, token_reader
from runcast_server.context import AppContext
from runcast_server.core.errors import NotFound
from runcast_server.core.models import Project
from runcast_server.policy.apply import View, view_for
from runcast_server.reads.access import readable_run
from runcast_server.reads.published import is_project_reader, sees_everything
from runcast_server.record.models import Run

T = TypeVar("T")


@dataclass(frozen=True)
class Reading:
    """The run as the caller may read it, inside the hop's session."""

    session: Session
    context: AppContext
    viewer: Project | None
    run: Run
    project: str

    @property
    def full(self) -> bool:
        """Whether the caller sees the run's paths, host and pid (reads/published.py)."""
        return sees_everything(self.run, self.viewer)

    @property
    def team(self) -> bool:
        """Whether the caller reads as the run's project."""
        return is_project_reader(self.run, self.viewer)

    def view(self) -> View:
        """What the run's publication policy shows the caller (the team: everything)."""
        return view_for(self.session, self.run, self.viewer)


@dataclass(frozen=True)
class RunRead:
    """A read of the run named in the path, not yet done: ``await read(work)`` runs ``work`` in one
    worker thread with a session of its own (404 for a missing or hidden run, 401 for a bad token)."""

    context: AppContext
    run_id: str
    method: str
    token: str | None
    cookie: str | None

    async def __call__(self, work: Callable[[Reading], T]) -> T:
        return await run_in_threadpool(self._in_thread, work)

    def _in_thread(self, work: Callable[[Reading], T]) -> T:
        with self.context.database.scope() as session:
            viewer = (token_reader(session, self.token) if self.token is not None
                      else session_viewer(session, self.method, self.cookie, run_id=self.run_id))
            run, project = readable_run(session, self.run_id, viewer)
            return work(Reading(session, self.context, viewer, run, project))


async def run_read_dep(
    request: Request, token: TokenDep, run_id: Annotated[str, Path(description="The run id.", max_length=64)],
) -> RunRead:
    """The read of ``run_id`` for this caller (no database work here: that is the hop's)."""
    if not ID_RE.match(run_id):
        raise NotFound("run", field="run")
    return RunRead(request.app.state.context, run_id, request.method, token, request.cookies.get(SESSION_COOKIE))


RunReadDep = Annotated[RunRead, Depends(run_read_dep)]


async def checked_run_read_dep(read: RunReadDep) -> RunRead:
    """``run_read_dep``, with the run's visibility checked first in a hop of its own: for a route
    whose required parameters must not answer before a hidden run's 404 does (the walls' promise)."""
    await read(lambda _: None)
    return read


CheckedRunReadDep = Annotated[RunRead, Depends(checked_run_read_dep)]
