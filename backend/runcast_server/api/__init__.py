"""The REST API under /api/v1: one router aggregating the route modules."""

from __future__ import annotations

from fastapi import APIRouter

from runcast_server.api.ingest_doc import IngestBatch
from runcast_server.api.routes import (
    admin,
    alerts,
    batch,
    blobs,
    broadcast,
    checkpoints,
    commands,
    comments,
    estimate,
    events,
    export,
    feeds,
    ingest,
    manage,
    manifests,
    members,
    metric_series,
    oidc,
    outputs,
    policy,
    reports,
    revisions,
    runs,
    stream,
    subscriptions,
    tokens,
    uploads,
    whoami,
)
from runcast_server.api.routes import session as session_routes
from runcast_server.api.upload_doc import UploadBegin
from runcast_server.core.errors import error_responses
from runcast_server.policy.schemas import PolicyChange

# Any route may answer 413 (the body limit, before reading) and 503 (database or queue down).
api_router = APIRouter(prefix="/api/v1", responses=error_responses(413, 503))
for module in (ingest, whoami, runs, manage, tokens, metric_series, events, export, stream, checkpoints, uploads, revisions,
               manifests):
    api_router.include_router(module.router)
for module in (alerts, feeds, subscriptions):  # docs/alerts.md
    api_router.include_router(module.router)
api_router.include_router(outputs.router)  # samples, evals, media (docs/samples.md)
api_router.include_router(estimate.router)  # the ZeRO memory estimate (runcast.estimate)
api_router.include_router(policy.router)  # publication policies (docs/api.md)
api_router.include_router(admin.router)  # the ingest inbox for operators (docs/api.md)
api_router.include_router(session_routes.router)  # dashboard sign-in (docs/auth.md)
api_router.include_router(oidc.router)  # OpenID Connect sign-in (docs/auth.md)
api_router.include_router(members.router)  # people's roles in projects (docs/auth.md)
api_router.include_router(blobs.router)  # images of runs: uploads and thumbnails (docs/samples.md)
api_router.include_router(broadcast.router)  # the cacheable broadcast (docs/live.md)
api_router.include_router(commands.router)  # the team's commands to live trainers (docs/commands.md)
api_router.include_router(comments.router)  # comments on runs (docs/comments.md)
api_router.include_router(reports.router)  # training reports (docs/reports.md)
api_router.include_router(batch.router)  # several of a run's reads in one request (docs/api.md)

# Models of bodies the routes read or write themselves, named in the document by documented.ref.
DOCUMENTED_REQUESTS = (IngestBatch, PolicyChange, UploadBegin)
DOCUMENTED_RESPONSES = stream.DOCUMENTED
