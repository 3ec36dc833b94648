"""HTTP to one server's ``/api/v1``: the address and token (arguments, else RUNCAST_SERVER and
RUNCAST_TOKEN), JSON calls and streamed bodies, every failure an ``ApiError``."""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any, Final

import httpx

from runcast.query.errors import ApiError, from_response

DEFAULT_SERVER: Final = "http://127.0.0.1:8000"


class Client:
    """One server, one token (or none: public runs only), one connection pool."""

    def __init__(self, server: str | None = None, token: str | None = None, timeout: float = 60.0) -> None:
        base = (server or os.environ.get("RUNCAST_SERVER") or DEFAULT_SERVER).rstrip("/")
        if not base.startswith(("http://", "https://")):
            raise ValueError(f"server must be an http:// or https:// address, got {base!r}")
        self.server = base
        self.token = token or os.environ.get("RUNCAST_TOKEN") or None
        headers = {"Authorization": f"Bearer {self.token}"} if self.token else {}
        self.http = httpx.Client(base_url=f"{base}/api/v1", headers=headers,
                                 timeout=httpx.Timeout(timeout, connect=10.0))

    def close(self) -> None:
        self.http.close()

    def call(self, method: str, path: str, **kwargs: Any) -> Any:
        """The JSON answer of one request; ``ApiError`` for a refusal or an unreachable server."""
        try:
            response = self.http.request(method, path, **kwargs)
        except httpx.HTTPError as exc:
            raise ApiError(f"could not reach {self.server}: {exc}") from exc
        if response.status_code >= 400:
            raise from_response(response)
        return response.json()

    def content(self, path: str, **params: Any) -> bytes:
        """The whole body of a GET."""
        with self.stream(path, **params) as response:
            return response.read()

    @contextmanager
    def stream(self, path: str, **params: Any) -> Iterator[httpx.Response]:
        """A GET whose body is read as it arrives."""
        try:
            with self.http.stream("GET", path, params=params) as response:
                if response.status_code >= 400:
                    raise from_response(response)
                yield response
        except httpx.HTTPError as exc:
            raise ApiError(f"could not reach {self.server}: {exc}") from exc
