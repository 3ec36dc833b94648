"""The REST API under /api/v1: one router aggregating the route modules."""

from __future__ import annotations

from fastapi import APIRouter

from runcast_server.api.routes import events, export, ingest, metrics, runs, stream
from runcast_server.api.routes import checkpoints, manifests, revisions
from runcast_server.api.routes import alerts, feeds, subscriptions
from runcast_server.api.routes import estimate

api_router = APIRouter(prefix="/api/v1")
for module in (ingest, runs, metrics, events, export, stream, checkpoints, revisions, manifests):
    api_router.include_router(module.router)
for module in (alerts, feeds, subscriptions):  # docs/alerts.md
    api_router.include_router(module.router)
api_router.include_router(estimate.router)  # the ZeRO memory estimate (runcast.estimate)
