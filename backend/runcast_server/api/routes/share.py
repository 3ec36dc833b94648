"""The share routes: ``/embed/runs/{id}`` (the chart alone, for an iframe), the badge
``/badge/runs/{id}.svg`` and the figures ``/api/v1/runs/{id}/plot.svg|png``.

Each reads the run through ``ReadableRunDep``, as the REST reads do: a private run is
the 404 of an unknown id to anyone without its project's token, an unlisted run is
reachable by its id. None of them shows a path, host or process id.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Annotated

from fastapi import APIRouter, Query, Request, Response
from runcast import __version__
from runcast.wire.events import MAX_STEP
from sqlalchemy import select

from runcast_server.alerts.service import stall_after
from runcast_server.api.deps import LanguageDep, SessionDep, ViewerDep
from runcast_server.api.read_deps import RUN_ERRORS, ReadableRunDep, ViewDep
from runcast_server.core.errors import VARY, ApiError
from runcast_server.core.i18n import messages
from runcast_server.core.settings import Settings
from runcast_server.metrics.queries import query_metrics
from runcast_server.reads.schemas import MAX_SEGMENT
from runcast_server.record.models import Segment
from runcast_server.runs.queries import summarize
from runcast_server.share.badge import TextMeter, run_badge
from runcast_server.share.http import (
    cache_headers,
    cached_response,
    etag_of,
    fresh,
    not_modified,
)
from runcast_server.share.plot import (
    MEDIA_TYPES,
    Figure,
    Format,
    Plotter,
    PlotterBusy,
    budget,
)
from runcast_server.web.frontend import Frontend
from runcast_server.web.pages import page_response

_GET = ["GET", "HEAD"]
KeyQuery = Annotated[str, Query(min_length=1, max_length=200, description="The metric name.")]


def share_router(frontend: Frontend, settings: Settings) -> APIRouter:
    """The share routes over the state built at start (the page files, the font, the plotter)."""
    router = APIRouter(tags=["share"])
    meter = TextMeter()
    plotter = Plotter()
    frame_policy = f"frame-ancestors {settings.embed_frame_ancestors}"

    @router.api_route("/embed/runs/{run_id}", methods=_GET, include_in_schema=False)
    def embed_page(request: Request, found: ReadableRunDep, key: KeyQuery) -> Response:
        """One metric's live chart with the run's name and a link to its page; nothing else."""
        response = page_response(request, frontend, "embed.html")
        response.headers["Content-Security-Policy"] = frame_policy
        return response

    @router.get(
        "/badge/runs/{run_id}.svg",
        responses={**RUN_ERRORS, 200: {"content": {"image/svg+xml": {}}, "description": "The badge."}},
        response_class=Response,
    )
    def get_run_badge(
        request: Request,
        session: SessionDep,
        found: ReadableRunDep,
        viewer: ViewerDep,
        policy: ViewDep,
        language: LanguageDep,
        key: Annotated[str | None, Query(min_length=1, max_length=200,
                                         description="Show this metric's last value.")] = None,
        label: Annotated[str | None, Query(min_length=1, max_length=100,
                                           description="Left-hand text; default: the run's name.")] = None,
    ) -> Response:
        """A README badge: the run's name | status · step · the last value of ``key``. Cached for
        15 s (ETag: a 304 when unchanged)."""
        run, project = found
        summary = summarize(run, project, stall_after_s=stall_after(session, run.id, settings.stall_after_s),
                            now=time.time(), view=policy, session=session)
        last = summary.last_values.get(key) if key is not None and policy.metric(key) else None
        svg = run_badge(
            name=summary.name, status=summary.status, last_step=summary.last_step, key=key,
            last=(last.step, last.value) if last is not None else None, label=label, t=messages(language),
        ).svg(meter)
        return cached_response(request, svg, "image/svg+xml", shared=viewer is None, headers=VARY)

    def plot(
        request: Request, session: SessionDep, found: ReadableRunDep, viewer: ViewerDep, policy: ViewDep, fmt: Format,
        language: str, key: str, segment: int | None, start: int | None, end: int | None, width: int, height: int,
        log: bool, scale: int,
    ) -> Response:
        run, _ = found
        policy.require_metric(key)
        answer = query_metrics(session, run, key=key, segment=segment, start=start, end=end,
                               max_points=budget(width), horizon=policy.horizon)
        starts = [(i, s) for i, s in session.execute(
            select(Segment.index, Segment.start_step).where(Segment.run_id == run.id).order_by(Segment.index))]
        figure = Figure(title=run.name, key=key, width=width, height=height, log=log, start=start, end=end,
                        language=language)  # in the ETag's input below: one language's figure is not another's
        # What the figure is drawn from: a client holding it gets its 304 without a drawing.
        etag = etag_of(repr((__version__, fmt, scale, answer.version, figure, segment, starts)).encode())
        filename = f"{run.id}-{''.join(c if c.isalnum() or c in '._-' else '_' for c in key)}.{fmt}"
        headers = {**cache_headers(etag, shared=viewer is None), **VARY,
                   "Content-Disposition": f'inline; filename="{filename}"'}
        if fresh(request, etag):
            return not_modified(headers)
        try:
            body = plotter.render(answer, starts, figure, fmt, scale)
        except PlotterBusy:
            raise ApiError(503, "busy drawing other figures; retry later", headers={"Retry-After": "5"}) from None
        return Response(body, media_type=MEDIA_TYPES[fmt], headers=headers)

    def plot_route(fmt: Format) -> Callable[..., Response]:
        def route(
            request: Request,
            session: SessionDep,
            found: ReadableRunDep,
            viewer: ViewerDep,
            policy: ViewDep,
            language: LanguageDep,
            key: KeyQuery,
            segment: Annotated[int | None, Query(ge=0, le=MAX_SEGMENT,
                                                 description="One segment's index; default: all.")] = None,
            start: Annotated[int | None, Query(ge=0, le=MAX_STEP, description="First step; default: the first logged.")] = None,
            end: Annotated[int | None, Query(ge=0, le=MAX_STEP, description="Last step, not below start; default: the last logged.")] = None,
            width: Annotated[int, Query(ge=200, le=4000, description="Width in pixels (SVG: points).")] = 800,
            height: Annotated[int, Query(ge=100, le=3000, description="Height in pixels (SVG: points).")] = 450,
            log: Annotated[bool, Query(description="Logarithmic y axis.")] = False,
            scale: Annotated[int, Query(ge=1, le=4, description="PNG only: pixels per point (2 for print).")] = 1,
        ) -> Response:
            return plot(request, session, found, viewer, policy, fmt, language, key, segment, start, end, width, height, log, scale)

        route.__doc__ = (f"The metric's chart as {fmt.upper()}, drawn from the rollups the page uses "
                         "(min–max band per bucket, so spikes show).")
        return route

    for fmt in ("svg", "png"):
        router.add_api_route(
            f"/api/v1/runs/{{run_id}}/plot.{fmt}", plot_route(fmt), methods=["GET"], name=f"get_plot_{fmt}",
            response_class=Response,
            responses={**RUN_ERRORS, 200: {"content": {MEDIA_TYPES[fmt]: {}}, "description": "The figure."}},
        )
    return router
