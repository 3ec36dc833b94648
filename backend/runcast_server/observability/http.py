"""Request latency by route template, ingest refusals, and the ``/metrics`` exposition."""

from __future__ import annotations

import hmac
import time
from typing import Any

from fastapi.routing import APIRoute
from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, generate_latest
from prometheus_client.multiprocess import MultiProcessCollector
from prometheus_client.registry import Collector
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from runcast_server.observability.prometheus import (
    Metrics,
    multiprocess_dir,
    reject_reason,
)

UNMATCHED = "unmatched"  # static files, 404s: one label value, never the raw path


def route_template(scope: Scope) -> str | None:
    """The matched API route's full template (``/api/v1/runs/{run_id}/stream``): the request's
    path less the part the route itself matched, followed by the route's own template. Worked
    out per route, never for the whole app at once: FastAPI builds an included router's route
    state on demand, and asking for every route's (``iter_route_contexts``) costs a fresh
    process 0.3 s on its first request."""
    route = scope.get("route")
    if not isinstance(route, APIRoute):
        return None
    params = scope.get("path_params", {})
    try:
        own = route.path_format.format(**{name: route.param_convertors[name].to_string(value)
                                          for name, value in params.items() if name in route.param_convertors})
    except (KeyError, ValueError, AssertionError):
        return None
    path: str = scope["path"]
    if not path.endswith(own):
        return None
    return path[: len(path) - len(own)] + route.path_format


class RequestMetrics:
    """ASGI middleware: each HTTP request's seconds to its response headers (a live stream
    counts until it starts), by method, route template and status; refused ingest batches."""

    def __init__(self, app: ASGIApp, metrics: Metrics, ingest_path: str) -> None:
        self.app = app
        self.metrics = metrics
        self.ingest_path = ingest_path
        self._templates: dict[int, str] = {}  # by id(route): the app's routes live as long as it serves

    def route_template(self, scope: Scope) -> str:
        """The matched route's template (``/api/v1/runs/{run_id}/stream``), never the path
        itself, so that no run id or project name reaches a label."""
        route = id(scope.get("route"))
        known = self._templates.get(route)
        if known is not None:
            return known
        template = route_template(scope)
        if template is None:
            return UNMATCHED
        self._templates[route] = template
        return template

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        start = time.perf_counter()
        recorded = False

        def record(status: int) -> None:
            nonlocal recorded
            if recorded:
                return
            recorded = True
            self.metrics.http_latency.labels(scope["method"], self.route_template(scope), str(status)).observe(
                time.perf_counter() - start)
            if status >= 400 and scope["path"] == self.ingest_path and scope["method"] == "POST":
                self.metrics.batches_rejected.labels(reject_reason(status)).inc()

        async def send_recording(message: Message) -> None:
            if message["type"] == "http.response.start":
                record(message["status"])
            await send(message)

        try:
            await self.app(scope, receive, send_recording)
        except Exception:
            record(500)
            raise


def scrape_registry(metrics: Metrics, collectors: list[Collector]) -> CollectorRegistry:
    """What ``/metrics`` serves, built once at app start: this process's instruments, or in
    multiprocess mode (``PROMETHEUS_MULTIPROC_DIR``) the values every process wrote there;
    plus ``collectors``, read at scrape time (the database gauges)."""
    path = multiprocess_dir()
    if path is None:
        registry = metrics.registry
    else:
        registry = CollectorRegistry()
        MultiProcessCollector(registry, path=path)
    for collector in collectors:
        registry.register(collector)
    return registry


def exposition(registry: CollectorRegistry, token: str | None) -> Any:
    """The ``GET /metrics`` endpoint serving ``registry`` (``scrape_registry``). With
    ``token`` set it answers only ``Authorization: Bearer <token>`` (401 otherwise)."""
    expected = f"Bearer {token}".encode() if token else None

    def metrics_endpoint(request: Request) -> Response:
        if expected is not None:
            given = request.headers.get("authorization", "").encode()
            if not hmac.compare_digest(given, expected):
                return JSONResponse({"error": {"message": "a valid metrics token is required", "field": "Authorization"}},
                                    status_code=401, headers={"WWW-Authenticate": "Bearer"})
        return Response(generate_latest(registry), media_type=CONTENT_TYPE_LATEST)

    return metrics_endpoint
