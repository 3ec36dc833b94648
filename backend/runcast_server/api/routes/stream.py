"""``GET /runs/{run_id}/stream``: the run's live updates as Server-Sent Events.

A plain ASGI response rather than sse-starlette's EventSourceResponse: each message is
encoded once per process (``live.frames.Frame``) and written as the same bytes to every viewer,
every write has a deadline (a client that stops reading cannot hold a stream open), and
the client's disconnect ends the stream at once, releasing its place in the run's
channel. See ``runcast_server.live`` for replay and fan-out, docs/live.md for the protocol.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncGenerator
from typing import Annotated, Any, Final

from fastapi import APIRouter, Header, Path, Query, Request
from pydantic import BaseModel
from runcast.wire.events import ID_RE
from starlette.concurrency import run_in_threadpool
from starlette.responses import Response
from starlette.types import ASGIApp, Receive, Scope, Send

from runcast_server.api.deps import SESSION_COOKIE, ContextDep, TokenDep, session_viewer, token_reader
from runcast_server.api.documented import ref
from runcast_server.core.db import Database
from runcast_server.core.errors import NotFound, error_responses
from runcast_server.core.models import Project
from runcast_server.live.fanout import Viewer
from runcast_server.live.schemas import StreamBatch, StreamCommands, StreamComments, StreamReports, StreamReset
from runcast_server.live.stream import viewer_frames
from runcast_server.observability.logs import run_scope
from runcast_server.observability.prometheus import Metrics
from runcast_server.policy.apply import public_policy
from runcast_server.reads.access import readable_run
from runcast_server.reads.published import is_project_reader

router = APIRouter(tags=["stream"])

# A version as Last-Event-ID: the digits of a stream's id (no version comes near 10**18); empty is none.
LAST_EVENT_ID: Final = r"^[0-9]{0,18}$"


SERVER_SEND = "runcast.server_send"


class ServerSend:
    """ASGI middleware, outside every other one the app adds: keeps the server's own ``send`` in
    the scope, so that a live stream's body writes can skip the middlewares' wrappers.

    The middlewares act on a response's start only (status, headers, timing). A stream makes one
    write per viewer per message, thousands per message on a popular run, and each wrapper
    it skips is a call saved on every one of them (docs/performance.md, "10,000 viewers").
    """

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http":
            scope[SERVER_SEND] = send
        await self.app(scope, receive, send)


class EventStream(Response):
    """``text/event-stream`` from an async iterator of bytes, ended by the client's disconnect."""

    media_type = "text/event-stream"

    def __init__(self, chunks: AsyncGenerator[bytes, None], viewer: Viewer, metrics: Metrics,
                 run_id: str) -> None:
        self.status_code = 200
        self.background = None
        self.raw_headers = [
            (b"content-type", b"text/event-stream; charset=utf-8"),
            (b"cache-control", b"no-cache"),
            (b"x-accel-buffering", b"no"),  # nginx: do not buffer the stream
        ]
        self.chunks = chunks
        self.viewer = viewer
        self.metrics = metrics
        self.run_id = run_id

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        self.metrics.sse_viewers.inc()
        try:
            with run_scope(self.run_id):  # the stream's log lines (live/) carry its run id
                await self._serve(receive, send, scope.get(SERVER_SEND, send))
        finally:
            self.metrics.sse_viewers.dec()

    async def _serve(self, receive: Receive, send: Send, body_send: Send) -> None:
        pump = asyncio.ensure_future(self._pump(send, body_send))
        watcher = asyncio.ensure_future(self._wait_disconnect(receive))
        self.viewer.on_abort = pump.cancel  # dropped (too slow, or a write not taken in time) or shutdown
        try:
            await asyncio.wait((pump, watcher), return_when=asyncio.FIRST_COMPLETED)
        finally:
            for task in (pump, watcher):
                task.cancel()
            for task in (pump, watcher):
                with contextlib.suppress(asyncio.CancelledError, TimeoutError, OSError):
                    await task

    async def _pump(self, send: Send, body_send: Send) -> None:
        """The response's start through the middlewares (``send``), its body to the server (``body_send``)."""
        viewer, clock = self.viewer, asyncio.get_running_loop().time
        try:
            await send({"type": "http.response.start", "status": self.status_code, "headers": self.raw_headers})
            async for chunk in self.chunks:
                # A client that stops reading fills the socket buffer and this write waits; live/fanout.py's
                # watch ends the stream after send_timeout_s (one timer per process, not one per write).
                viewer.writing_since = began = clock()
                await body_send({"type": "http.response.body", "body": chunk, "more_body": True})
                viewer.writing_since, viewer.last_write = None, began
            await body_send({"type": "http.response.body", "body": b"", "more_body": False})
        finally:
            await self.chunks.aclose()

    @staticmethod
    async def _wait_disconnect(receive: Receive) -> None:
        while (await receive())["type"] != "http.disconnect":
            pass


def _version(raw: str | None) -> int | None:
    """A Last-Event-ID (header or query) as a version; empty or absent: none."""
    return int(raw) if raw else None


def _check_access(database: Database, run_id: str, token: str | None, cookie: str | None) -> tuple[bool, str]:
    """404 for a missing or hidden run, 401 for a bad token (a short session; no connection is
    held for the stream's lifetime). Returns whether the caller reads as the run's project
    (its token, or without one a dashboard session cookie), and the run's public policy
    (``View.key``) now."""
    with database.scope() as session:
        viewer: Project | None
        if token is not None:
            viewer = token_reader(session, token)
        else:
            viewer = session_viewer(session, "GET", cookie, run_id=run_id)
        run, _ = readable_run(session, run_id, viewer)
        return is_project_reader(run, viewer), public_policy(session, run.id).key


def _message(event: str, data: type[BaseModel], *, versioned: bool = True) -> dict[str, Any]:
    """One SSE message as its fields (FastAPI's SSE item schema): ``event``, ``id`` (the run
    version; none on a notice, ``versioned=False``) and ``data``, the JSON of ``data``."""
    return {
        "type": "object",
        "required": ["event", "id", "data"] if versioned else ["event", "data"],
        "properties": {
            "event": {"const": event},
            "id": {"type": "string", "pattern": r"^[0-9]+$"},
            "data": {"type": "string", "contentMediaType": "application/json", "contentSchema": ref(data)},
            "retry": {"type": "integer", "minimum": 0},
        },
    }


# The models the stream's item schema names (the app adds them to the document's components).
DOCUMENTED: Final = (StreamBatch, StreamReset, StreamComments, StreamReports, StreamCommands)
STREAM_ITEM: Final = {"oneOf": [_message("batch", StreamBatch), _message("reset", StreamReset),
                                _message("comments", StreamComments, versioned=False),
                                _message("reports", StreamReports, versioned=False),
                                _message("commands", StreamCommands, versioned=False)]}


@router.get(
    "/runs/{run_id}/stream",
    response_class=Response,  # no media type of its own: the 200 below declares the stream
    status_code=200,
    responses={
        200: {"content": {"text/event-stream": {"itemSchema": STREAM_ITEM}},
              "description": "Server-Sent Events, one item per message; see docs/live.md."},
        **error_responses(401, 404, 422),
    },
)
async def stream_run(
    request: Request,
    ctx: ContextDep,
    token: TokenDep,
    run_id: Annotated[str, Path(description="The run id.", max_length=64)],
    last_event_id_header: Annotated[
        str | None,
        Header(alias="Last-Event-ID", pattern=LAST_EVENT_ID, description="The last id received; replay after it."),
    ] = None,
    last_event_id: Annotated[
        str | None, Query(pattern=LAST_EVENT_ID, description="As the Last-Event-ID header (the header wins).")
    ] = None,
) -> EventStream:
    """One ``batch`` message per committed ingest batch (``id`` = run version), live.

    With Last-Event-ID (header or query) every version after it is replayed first, then
    the stream continues live with no gap and no duplicate; without one, or when the
    client is too far behind, the stream begins with ``event: reset`` carrying the current
    version (reload through REST, then apply the batches that follow). A comment line
    every 15 s keeps proxies from closing an idle stream.
    """
    if not ID_RE.match(run_id):
        raise NotFound("run", field="run")
    after = _version(last_event_id_header)
    if after is None:
        after = _version(last_event_id)
    project_reader, policy = await run_in_threadpool(_check_access, ctx.database, run_id, token,
                                                     request.cookies.get(SESSION_COOKIE))
    viewer = Viewer(ctx.settings.stream_viewer_queue, project_reader=project_reader, policy=policy)
    return EventStream(viewer_frames(ctx.registry, run_id, after, viewer), viewer, request.app.state.metrics, run_id)
