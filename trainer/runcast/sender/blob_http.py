"""Images' bytes to the server: ``HEAD`` and ``PUT /api/v1/runs/{run}/blobs/{sha256}`` (docs/samples.md).

Used by the media worker (``media_worker``), by the sender's replay of a spool and by
``runcast sync`` (``spool_blobs``); never by the sender's live path. A call returns, or raises
``Retryable`` (unreachable, busy, 5xx; ``NotYet``: 404 while the server has not stored the
run's start) or ``Rejected`` (the server refuses these bytes for good).
"""

from __future__ import annotations

from typing import Any, Final

from .transport import Rejected, Retryable, public_url

BLOBS_PATH: Final = "/api/v1/runs/{run}/blobs/{sha256}"


class NotYet(Retryable):
    """404 to a PUT: the server has not stored the run's start yet (or the run is not the token's)."""


class BlobClient:
    """Blob requests to one server with one token (an httpx client, safe to share between threads)."""

    def __init__(self, server: str, token: str | None, timeout: float = 30.0) -> None:
        import httpx

        self._httpx = httpx
        self.url = public_url(server.rstrip("/"))
        headers = {"User-Agent": "runcast-sdk"}
        if token:
            headers["Authorization"] = f"Bearer {token}"
        self._client = httpx.Client(base_url=server.rstrip("/"), headers=headers,
                                    timeout=httpx.Timeout(timeout, connect=min(timeout, 10.0)))

    def held(self, run: str, sha256: str) -> bool:
        """Whether the server holds the blob (HEAD: 200 or 404)."""
        response = self._request("HEAD", run, sha256)
        if response.status_code == 200:
            return True
        if response.status_code == 404:
            return False
        raise _failure(response)

    def put(self, run: str, sha256: str, data: bytes, content_type: str) -> None:
        """Store the blob (201, or 200 when the server had it)."""
        response = self._request("PUT", run, sha256, content=data, headers={"Content-Type": content_type})
        if response.status_code not in (200, 201):
            raise _failure(response, not_yet=True)

    def store(self, run: str, sha256: str, data: bytes, content_type: str) -> bool:
        """HEAD, then PUT what the server lacks; True when the bytes were sent."""
        if self.held(run, sha256):
            return False
        self.put(run, sha256, data, content_type)
        return True

    def close(self) -> None:
        self._client.close()

    def _request(self, method: str, run: str, sha256: str, **kwargs: Any) -> Any:
        try:
            return self._client.request(method, BLOBS_PATH.format(run=run, sha256=sha256), **kwargs)
        except self._httpx.TransportError as exc:
            raise Retryable(f"{type(exc).__name__}: {exc}") from exc


def _failure(response: Any, not_yet: bool = False) -> Exception:
    """The exception for an answer other than success: Retryable or Rejected."""
    status = response.status_code
    try:
        message = response.json()["error"]["message"]
    except (ValueError, KeyError, TypeError):
        message = response.text[:200] or f"HTTP {status}"
    if not_yet and status == 404:
        return NotYet(f"HTTP 404: {message}")
    if status in (408, 429) or status >= 500:
        return Retryable(f"HTTP {status}: {message}")
    try:
        field = response.json()["error"].get("field")
    except (ValueError, KeyError, TypeError, AttributeError):
        field = None
    return Rejected(f"HTTP {status}: {message}", status, field if isinstance(field, str) else None)
