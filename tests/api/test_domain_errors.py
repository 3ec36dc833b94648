"""Domain errors (core.errors: raised by the services, without HTTP) answer exactly as the
``ApiError`` of their status would: the same status, headers and bytes."""

from __future__ import annotations

import pytest
from fastapi import FastAPI
from fastapi.testclient import TestClient
from runcast_server.core.errors import ApiError, DomainError, Invalid, NotFound, install_error_handlers


def _client(raised: Exception) -> TestClient:
    app = FastAPI()
    install_error_handlers(app)

    @app.get("/x")
    def fail() -> None:
        raise raised

    return TestClient(app)


@pytest.mark.parametrize(
    ("domain", "http"),
    [
        (NotFound("run", field="run"), ApiError(404, "run not found", field="run")),
        (NotFound("segment 3"), ApiError(404, "segment 3 not found")),
        (Invalid("malformed cursor: pass next_cursor back unchanged", field="cursor"),
         ApiError(422, "malformed cursor: pass next_cursor back unchanged", field="cursor")),
        (DomainError("refused", field="x"), ApiError(422, "refused", field="x")),
    ],
)
def test_a_domain_error_answers_as_the_api_error_of_its_status(domain: DomainError, http: ApiError) -> None:
    got, want = _client(domain).get("/x"), _client(http).get("/x")
    assert got.status_code == want.status_code == http.status
    assert got.content == want.content
    assert got.headers == want.headers
