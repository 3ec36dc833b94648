"""Delivering one wire batch over HTTP to ``/api/v1/ingest``.

A transport either returns (the batch was accepted), raises ``Retryable`` (the
service is unreachable or busy: try again later) or raises ``Rejected`` (the batch
can never be accepted as it is). Nothing here retries; the sender decides.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any, Final, Protocol
from urllib.parse import urlsplit, urlunsplit

INGEST_PATH: Final = "/api/v1/ingest"
DEFAULT_TIMEOUT: Final = 10.0
REDIS_RETIRED: Final = (
    "the redis:// transport was retired: a batch handed straight to the broker is lost if Redis "
    "restarts before a worker stores it. Send to the server's HTTP address instead "
    "(server='http://<runcast api>:8000'): its 202 means the batch is committed"
)


class TransportError(Exception):
    """A batch was not delivered."""


class Retryable(TransportError):
    """Not delivered for now (connection, timeout, 5xx, 408, 429); ``retry_after`` in seconds if known."""

    def __init__(self, message: str, retry_after: float | None = None) -> None:
        super().__init__(message)
        self.retry_after = retry_after


class Rejected(TransportError):
    """The service refused the batch for good (a 4xx other than 408 and 429); ``field`` and
    ``index``: the field and the event its error names, when it names them."""

    def __init__(self, message: str, status: int, field: str | None = None, index: int | None = None) -> None:
        super().__init__(message)
        self.status = status
        self.field = field
        self.index = index

    @property
    def too_large(self) -> bool:
        """The batch is bigger than the service takes: 413 (bytes), or 422 on the batch's ``events``."""
        return self.status == 413 or (self.status == 422 and self.field == "events" and self.index is None)


class Transport(Protocol):
    """Where batches go. ``url`` never contains credentials (it is written to the spool)."""

    url: str

    def send(self, body: bytes, events: Sequence[dict[str, Any]], timeout: float) -> list[dict[str, Any]] | None:
        """Deliver one batch (``body`` is ``events`` encoded by ``events.dumps_batch``); returns the
        commands the answer carries for the run (docs/commands.md), if any."""

    def close(self) -> None:
        """Release connections."""


def public_url(url: str) -> str:
    """``url`` without user name or password, safe to print and to write to disk."""
    parts = urlsplit(url)
    if parts.username is None and parts.password is None:
        return url
    host = parts.hostname or ""
    if parts.port is not None:
        host = f"{host}:{parts.port}"
    return urlunsplit((parts.scheme, host, parts.path, parts.query, parts.fragment))


def make_transport(url: str, token: str | None) -> Transport:
    """The transport for a ``http(s)://`` server URL."""
    scheme = urlsplit(url).scheme.lower()
    if scheme in ("http", "https"):
        return HttpTransport(url, token)
    if scheme in ("redis", "rediss"):
        raise ValueError(f"{public_url(url)}: {REDIS_RETIRED}")
    raise ValueError(f"unsupported transport {public_url(url)!r}: use the server's address, http(s)://host:port")


class HttpTransport:
    """POST batches to ``{server}/api/v1/ingest`` with a bearer token."""

    def __init__(self, server: str, token: str | None, timeout: float = DEFAULT_TIMEOUT) -> None:
        import httpx

        self._httpx = httpx
        self.url = public_url(server.rstrip("/"))
        headers = {"Content-Type": "application/json", "User-Agent": "runcast-sdk"}
        if token:
            headers["Authorization"] = f"Bearer {token}"
        self._client = httpx.Client(headers=headers, timeout=timeout)
        self._endpoint = server.rstrip("/") + INGEST_PATH
        self._timeout = timeout

    def send(self, body: bytes, events: Sequence[dict[str, Any]], timeout: float) -> list[dict[str, Any]] | None:
        httpx = self._httpx
        try:
            response = self._client.post(self._endpoint, content=body, timeout=min(timeout, self._timeout))
        except httpx.TransportError as exc:
            raise Retryable(f"{type(exc).__name__}: {exc}") from exc
        status = response.status_code
        if status < 300:
            return _commands(response.content)
        message = _error_message(response.content) or f"HTTP {status}"
        if status in (408, 429) or status >= 500:
            raise Retryable(f"HTTP {status}: {message}", _retry_after(response.headers.get("Retry-After")))
        raise Rejected(f"HTTP {status}: {message}", status, *_error_place(response.content))

    def close(self) -> None:
        self._client.close()


def _commands(content: bytes) -> list[dict[str, Any]] | None:
    """The ``commands`` of an ingest answer (a server older than commands sends none)."""
    try:
        commands = json.loads(content).get("commands")
    except (ValueError, AttributeError):
        return None
    return [c for c in commands if isinstance(c, dict)] if isinstance(commands, list) else None


def _error_message(content: bytes) -> str:
    text = content[:300].decode("utf-8", "replace").strip()
    try:
        doc = json.loads(content)
    except ValueError:
        return text
    error = doc.get("error") if isinstance(doc, dict) else None
    if isinstance(error, dict):
        where = ", ".join(f"{k} {error[k]}" for k in ("index", "field") if error.get(k) is not None)
        return f"{error.get('message')}" + (f" ({where})" if where else "")
    if error is not None:
        return str(error)
    if isinstance(doc, dict) and "detail" in doc:
        return str(doc["detail"])
    return text


def _error_place(content: bytes) -> tuple[str | None, int | None]:
    """The field and event index a JSON error body names (``{"error": {"field", "index"}}``)."""
    try:
        error = json.loads(content).get("error")
    except (ValueError, AttributeError):
        return None, None
    if not isinstance(error, dict):
        return None, None
    field, index = error.get("field"), error.get("index")
    return (field if isinstance(field, str) else None,
            index if isinstance(index, int) and not isinstance(index, bool) else None)


def _retry_after(raw: str | None) -> float | None:
    try:
        return max(0.0, float(raw)) if raw else None
    except ValueError:
        return None
