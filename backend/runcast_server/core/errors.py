"""Domain errors, the error schema, and the one place that turns every failure into JSON.

The domains' services raise ``DomainError``s, which say what is wrong and with which field
but nothing of HTTP (``NotFound``, ``Invalid``); routes and request dependencies raise
``ApiError`` with its status (a token, a header, a body limit). ``install_error_handlers``
answers a domain error with its kind's status (``DOMAIN_STATUS``) and the body an
``ApiError`` of that status and field would have.

Every error leaves as ``{"error": {"message", "field"?, "index"?}}``: a client's
mistake with its 4xx, a database or broker that cannot be reached (or a read-only
database, or a disk below ``RUNCAST_MIN_FREE_BYTES``) as 503 with ``Retry-After``, anything unexpected as a 500 (logged with its traceback). Bodies are
ASCII-escaped JSON, so no text a client sent can make an error unencodable.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Mapping
from typing import Any, Final

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from fastapi.routing import iter_route_contexts
from pydantic import BaseModel, Field
from runcast.wire.events import EventError
from sqlalchemy.exc import DBAPIError, OperationalError
from sqlalchemy.exc import TimeoutError as PoolTimeout
from starlette.exceptions import HTTPException as StarletteHTTPException

from runcast_server.core.db import is_read_only
from runcast_server.core.disk import DiskFull
from runcast_server.core.i18n import SOURCE, messages, negotiate
from runcast_server.core.validation_text import validation_message

log = logging.getLogger(__name__)

RETRY_AFTER_S: Final = 5


class ErrorDetail(BaseModel):
    message: str = Field(description="What went wrong, for a person.")
    field: str | None = Field(None, description="The parameter, header or body field at fault.")
    index: int | None = Field(None, description="The event's position in an ingest batch.")


class ErrorBody(BaseModel):
    """The body of every error response."""

    error: ErrorDetail


_DESCRIPTIONS: Final = {
    400: "The body is not valid JSON.",
    401: "A missing, malformed, invalid or revoked token.",
    403: "The token's project may not do this.",
    404: "Not found, or not visible to the caller (private resources answer 404 to anyone else).",
    405: "Method not allowed (the Allow header lists the allowed ones).",
    409: "Conflicts with what is stored.",
    410: "Gone: the trainer pruned it.",
    413: "The request body is over the limit.",
    415: "The body must be sent as Content-Type: application/json.",
    416: "The range starts past the end of the file.",
    422: "A parameter or body field is invalid (``field`` names it).",
    429: "Too many requests; see Retry-After.",
    502: "A mail server did not take the message.",
    503: "The database or the queue cannot be reached, or the server's disk is full; retry after Retry-After "
         "seconds.",
}


def error_responses(*codes: int) -> dict[int | str, dict[str, Any]]:
    """OpenAPI ``responses`` declaring these error statuses with the real error schema."""
    return {code: {"model": ErrorBody, "description": _DESCRIPTIONS[code]} for code in codes}


class ApiError(Exception):
    """An error a client caused or may see: ``status`` with a JSON body naming the field."""

    def __init__(
        self,
        status: int,
        message: str,
        *,
        field: str | None = None,
        index: int | None = None,
        headers: dict[str, str] | None = None,
    ) -> None:
        super().__init__(message)
        self.status = status
        self.message = message
        self.field = field
        self.index = index
        self.headers = headers

    def body(self) -> dict[str, Any]:
        return error_body(self.message, field=self.field, index=self.index)


class DomainError(Exception):
    """What a domain refuses, and the field at fault; no status: the app maps each kind to one."""

    def __init__(self, message: str, *, field: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.field = field

    def body(self) -> dict[str, Any]:
        return error_body(self.message, field=self.field)


class NotFound(DomainError):
    """Missing, or not visible to the caller (which is answered exactly as missing)."""

    def __init__(self, what: str, field: str | None = None) -> None:
        super().__init__(f"{what} not found", field=field)
        self.what = what


class Invalid(DomainError):
    """A parameter or value the domain cannot take (a malformed cursor, an empty range, too many tags)."""


# The status each kind of domain error is answered with.
DOMAIN_STATUS: Final[dict[type[DomainError], int]] = {NotFound: 404, Invalid: 422}


def domain_status(exc: DomainError) -> int:
    """The status of ``exc``'s kind: its nearest class in ``DOMAIN_STATUS`` (422 for one not mapped)."""
    return next((DOMAIN_STATUS[k] for k in type(exc).__mro__ if k in DOMAIN_STATUS), 422)


def request_language(request: Request) -> str:
    """The language a request asks for: ``?lang=``, else its ``Accept-Language``, else English."""
    return negotiate(request.headers.get("accept-language"), request.query_params.get("lang"))


def _translated(request: Request, message: str, exc: Exception | None = None) -> str:
    """An error's message in the request's language (English, as sent, when no translation exists)."""
    language = request_language(request)
    if language == SOURCE:
        return message
    t = messages(language)
    if isinstance(exc, NotFound):
        return t("{what} not found", what=t(exc.what, context="thing"))
    return t(message)


def localized(request: Request, body: dict[str, Any], exc: Exception | None = None) -> dict[str, Any]:
    """``body`` with its message for a person in the request's language; ``field`` and the shape unchanged."""
    message = body.get("error", {}).get("message")
    if isinstance(message, str):
        body["error"]["message"] = _translated(request, message, exc)
    return body


VARY: Final = {"Vary": "Accept-Language"}


def error_body(message: str, *, field: str | None = None, index: int | None = None) -> dict[str, Any]:
    error: dict[str, Any] = {"message": message}
    if field is not None:
        error["field"] = field
    if index is not None:
        error["index"] = index
    return {"error": error}


class ErrorResponse(JSONResponse):
    """A JSON error; ASCII-escaped so that any text a client sent can be echoed safely."""

    def render(self, content: Any) -> bytes:
        return json.dumps(content, ensure_ascii=True, allow_nan=False, separators=(",", ":")).encode()


def error_response(status: int, body: dict[str, Any], headers: dict[str, str] | None = None) -> ErrorResponse:
    return ErrorResponse(body, status_code=status, headers=headers)


# The 503s' messages, one per dependency (whole sentences, so that each translates as one).
_UNAVAILABLE: Final = {"database": "database unavailable; retry later", "queue": "queue unavailable; retry later",
                       "disk": "the server's disk is full; retry later"}


def unavailable(request: Request, what: str) -> ErrorResponse:
    """503 for a dependency that cannot be reached (``_UNAVAILABLE``), with Retry-After."""
    return error_response(503, localized(request, error_body(_UNAVAILABLE[what])),
                          headers={"Retry-After": str(RETRY_AFTER_S), **VARY})


def _allowed_methods(request: Request) -> set[str]:
    """Every method some route serves at this path (the router names only the first route's)."""
    path = request.scope.get("path", "")
    methods: set[str] = set()
    for route in iter_route_contexts(request.app.router.routes):  # included routers flattened
        route_methods = route.methods
        if route_methods and route.path_regex.match(path):
            methods |= set(route_methods)
    return methods


def _broker_errors() -> tuple[type[Exception], ...]:
    from kombu.exceptions import OperationalError as BrokerError
    from redis.exceptions import ConnectionError as RedisConnectionError
    from redis.exceptions import TimeoutError as RedisTimeout

    return (BrokerError, RedisConnectionError, RedisTimeout)


def install_error_handlers(app: FastAPI) -> None:
    """Route every exception to one JSON error shape (see the module docstring)."""

    @app.exception_handler(ApiError)
    async def _api_error(request: Request, exc: ApiError) -> ErrorResponse:
        headers = {**(exc.headers or {}), **VARY}
        if exc.status == 401:
            headers["WWW-Authenticate"] = "Bearer"
        return error_response(exc.status, localized(request, exc.body(), exc), headers)

    @app.exception_handler(DomainError)
    async def _domain_error(request: Request, exc: DomainError) -> ErrorResponse:
        return error_response(domain_status(exc), localized(request, exc.body(), exc), VARY)

    @app.exception_handler(EventError)
    async def _event_error(_: Request, exc: EventError) -> ErrorResponse:
        return error_response(422, {"error": exc.as_dict()})

    @app.exception_handler(RequestValidationError)
    async def _validation(request: Request, exc: RequestValidationError) -> ErrorResponse:
        first: Mapping[str, Any] = exc.errors()[0] if exc.errors() else {"loc": (), "msg": "invalid request"}
        language = request_language(request)
        if first.get("type") == "json_invalid":  # the body itself, not a field of it
            message = messages(language)("the body is not JSON: {error}", error=first.get("msg", ""))
            return error_response(422, error_body(message, field="body"), VARY)
        # The location's kind comes first; a field may itself be named "body" (a comment's, a report's).
        loc = [str(p) for p in first.get("loc", ())]
        loc = loc[1:] if loc and loc[0] in ("body", "query", "path", "header") else loc
        return error_response(422, error_body(validation_message(first, language), field=".".join(loc) or "request"),
                              VARY)

    @app.exception_handler(StarletteHTTPException)
    async def _http(request: Request, exc: StarletteHTTPException) -> ErrorResponse:
        headers = dict(exc.headers or {})
        status, detail = exc.status_code, str(exc.detail)
        if status == 400 and detail == "There was an error parsing the body":  # FastAPI: not UTF-8 JSON
            return error_response(422, localized(request, error_body("the body is not JSON (UTF-8)", field="body")), VARY)
        if status in (404, 405):
            # A method no route serves at a path some route serves is a 405 (the static files
            # mounted at / would otherwise answer a HEAD or a POST with their own 404 or 405).
            allowed = _allowed_methods(request)
            if allowed and request.method not in allowed:
                status, detail = 405, "Method Not Allowed"
            if status == 405:
                headers["Allow"] = ", ".join(sorted(allowed or {"GET", "HEAD"}))  # none: the static files
        body = localized(request, error_body(detail, field="body" if status == 413 else None))
        return error_response(status, body, {**headers, **VARY})

    async def _database_down(request: Request, exc: Exception) -> ErrorResponse:
        log.warning("database unavailable: %s", exc)
        return unavailable(request, "database")

    for kind in (OperationalError, PoolTimeout):
        app.add_exception_handler(kind, _database_down)

    @app.exception_handler(DBAPIError)
    async def _database_error(request: Request, exc: DBAPIError) -> ErrorResponse:
        if exc.connection_invalidated or is_read_only(exc):
            return await _database_down(request, exc)
        return await _internal(request, exc)

    @app.exception_handler(DiskFull)
    async def _disk_full(request: Request, exc: DiskFull) -> ErrorResponse:
        log.warning("refused: %s", exc)
        return unavailable(request, "disk")

    async def _queue_down(request: Request, exc: Exception) -> ErrorResponse:
        log.warning("redis unavailable: %s", exc)
        return unavailable(request, "queue")

    for broker_error in _broker_errors():
        app.add_exception_handler(broker_error, _queue_down)

    @app.exception_handler(Exception)
    async def _internal(request: Request, exc: Exception) -> ErrorResponse:
        log.error("unhandled error on %s %s", request.method, request.url.path, exc_info=exc)
        return error_response(500, localized(request, error_body("internal server error")), VARY)
