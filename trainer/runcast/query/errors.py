"""The query client's one error: what the server (or the network) refused, and why."""

from __future__ import annotations

import json

import httpx


class ApiError(Exception):
    """A request the server refused (``status``: its HTTP status, ``field``: the parameter or body
    field it named, if any) or could not be sent (``status`` 0: the server could not be reached)."""

    def __init__(self, message: str, status: int = 0, field: str | None = None) -> None:
        super().__init__(f"{message} ({field})" if field else message)
        self.message = message
        self.status = status
        self.field = field


def from_response(response: httpx.Response) -> ApiError:
    """The error a Runcast error answer (``{"error": {"message", "field"}}``) describes."""
    text = response.read().decode(errors="replace")
    where = f"{response.request.method} {response.request.url.path} answered {response.status_code}"
    try:
        error = json.loads(text)["error"]
        return ApiError(f"{where}: {error['message']}", response.status_code, error.get("field"))
    except (ValueError, KeyError, TypeError):
        return ApiError(f"{where}: {text.strip()[:300] or response.reason_phrase}", response.status_code)
