"""Domain errors and the one handler that turns them into JSON responses."""

from __future__ import annotations

from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from starlette.exceptions import HTTPException as StarletteHTTPException

from runcast.events import EventError


class ApiError(Exception):
    """An error a client caused or may see: ``status`` with a JSON body naming the field."""

    def __init__(self, status: int, message: str, *, field: str | None = None, index: int | None = None) -> None:
        super().__init__(message)
        self.status = status
        self.message = message
        self.field = field
        self.index = index

    def body(self) -> dict[str, Any]:
        error: dict[str, Any] = {"message": self.message}
        if self.field is not None:
            error["field"] = self.field
        if self.index is not None:
            error["index"] = self.index
        return {"error": error}


class NotFound(ApiError):
    def __init__(self, what: str, field: str | None = None) -> None:
        super().__init__(404, f"{what} not found", field=field)


def install_error_handlers(app: FastAPI) -> None:
    """Every error leaves as ``{"error": {"message", "field"?, "index"?}}``."""

    @app.exception_handler(ApiError)
    async def _api_error(_: Request, exc: ApiError) -> JSONResponse:
        headers = {"WWW-Authenticate": "Bearer"} if exc.status == 401 else None
        return JSONResponse(exc.body(), status_code=exc.status, headers=headers)

    @app.exception_handler(EventError)
    async def _event_error(_: Request, exc: EventError) -> JSONResponse:
        return JSONResponse({"error": exc.as_dict()}, status_code=422)

    @app.exception_handler(RequestValidationError)
    async def _validation(_: Request, exc: RequestValidationError) -> JSONResponse:
        first = exc.errors()[0] if exc.errors() else {"loc": (), "msg": "invalid request"}
        loc = [str(p) for p in first.get("loc", ()) if p not in ("body", "query", "path", "header")]
        return JSONResponse(
            {"error": {"message": first.get("msg", "invalid request"), "field": ".".join(loc) or None}},
            status_code=422,
        )

    @app.exception_handler(StarletteHTTPException)
    async def _http(_: Request, exc: StarletteHTTPException) -> JSONResponse:
        return JSONResponse({"error": {"message": str(exc.detail)}}, status_code=exc.status_code, headers=exc.headers)
