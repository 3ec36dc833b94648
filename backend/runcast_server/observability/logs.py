"""``RUNCAST_LOG_FORMAT=json``: one JSON object per log line, with the run id where known.

A log call names its run with ``extra={"run_id": ...}``; code that handles one run for a
while (a live channel, an ingest task) sets ``run_scope`` instead, and every line logged
inside carries it.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from datetime import UTC, datetime
from typing import Any, Final

current_run: ContextVar[str | None] = ContextVar("runcast_run_id", default=None)

# Attributes every LogRecord has; anything else came through ``extra`` and is kept.
_STANDARD: Final = frozenset(vars(logging.LogRecord("", 0, "", 0, "", (), None))) | {"message", "asctime"}


@contextmanager
def run_scope(run_id: str | None) -> Iterator[None]:
    """Lines logged inside (this task or thread) carry ``run_id``."""
    token = current_run.set(run_id)
    try:
        yield
    finally:
        current_run.reset(token)


class JsonFormatter(logging.Formatter):
    """``{"ts", "level", "logger", "message", "run_id"?, "exc"?, ...extra}`` on one line."""

    def format(self, record: logging.LogRecord) -> str:
        out: dict[str, Any] = {
            "ts": datetime.fromtimestamp(record.created, UTC).isoformat(timespec="milliseconds"),
            "level": record.levelname,
            "logger": record.name,
            "message": record.getMessage(),
        }
        for key, value in vars(record).items():
            if key not in _STANDARD and not key.startswith("_") and key not in ("color_message",):
                out[key] = value
        if out.get("run_id") is None:
            run_id = current_run.get()
            if run_id is not None:
                out["run_id"] = run_id
            else:
                out.pop("run_id", None)
        if record.exc_info:
            out["exc"] = self.formatException(record.exc_info)
        elif record.exc_text:
            out["exc"] = record.exc_text
        return json.dumps(out, default=str, ensure_ascii=False)


def use_json(logger: logging.Logger) -> None:
    """Give every handler of ``logger`` the JSON formatter."""
    for handler in logger.handlers:
        handler.setFormatter(JsonFormatter())


def uvicorn_log_config(base: dict[str, Any], log_format: str) -> dict[str, Any]:
    """uvicorn's logging dictConfig with the JSON formatter on every handler when asked."""
    if log_format == "json":
        for name in base["formatters"]:
            base["formatters"][name] = {"()": f"{__name__}.JsonFormatter"}
    return base
