"""The OpenAPI document builds, names every public route, and has unique operation ids."""

from __future__ import annotations

import warnings
from typing import Any


def test_openapi_lists_the_public_surface(client: Any) -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # a duplicate operation id is a warning in FastAPI
        doc = client.get("/openapi.json").json()
    paths = doc["paths"]
    for path in (
        "/api/v1/ingest",
        "/api/v1/runs",
        "/api/v1/runs/{run_id}",
        "/api/v1/runs/{run_id}/metrics",
        "/api/v1/runs/{run_id}/events",
        "/api/v1/runs/{run_id}/stream",
        "/api/v1/runs/{run_id}/checkpoints",
        "/api/v1/runs/{run_id}/checkpoints/{cid}/download",
        "/api/v1/runs/{run_id}/alerts",
        "/api/v1/subscriptions",
        "/healthz",
    ):
        assert path in paths, path
    ids = [op["operationId"] for item in paths.values() for op in item.values()]
    assert len(ids) == len(set(ids))
