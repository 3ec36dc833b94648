"""Fixtures of the alert tests: the embedded app with extra settings (``make_client``)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest


@pytest.fixture
def make_client(embedded_env, monkeypatch) -> Iterator[Any]:
    """``make_client(**env)``: the embedded app with extra RUNCAST_* settings; returns (client, token)."""
    from fastapi.testclient import TestClient
    from runcast_server.app import create_app
    from runcast_server.core.auth import create_token

    clients = []

    def make(**env: str) -> tuple[Any, str]:
        base = {"RUNCAST_WEBHOOK_ALLOW_CIDRS": "127.0.0.0/8", "RUNCAST_ALERT_CHECK_INTERVAL_S": "3600"}
        for k, v in {**base, **env}.items():
            monkeypatch.setenv(k, v)
        client = TestClient(create_app())
        client.__enter__()
        clients.append(client)
        with client.app.state.context.database.scope() as s:
            token = create_token(s, "demo")
        return client, token

    yield make
    for c in clients:
        c.__exit__(None, None, None)
