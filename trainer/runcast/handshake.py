"""The one request ``init()`` makes: ``GET /api/v1/whoami`` (is the token good, for which project,
where does a resumed run stand). A refusal raises ``InitError`` before training starts; an
unreachable server is not an error (the run spools and is sent when the server answers).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any, Final

from .sender.transport import _error_message, public_url
from .wire.limits import COLUMNS_TYPE, COMPATIBLE_BATCH_EVENTS, MAX_BATCH_BYTES, MAX_BATCH_EVENTS

WHOAMI_PATH: Final = "/api/v1/whoami"
DEFAULT_START_TIMEOUT: Final = 5.0

log = logging.getLogger("runcast")


class InitError(RuntimeError):
    """``init()`` cannot broadcast this run: the server refused the token, the token is for
    another project or lacks the ``ingest`` scope, or the run id belongs to another project. Raised at ``init()``, never later."""


@dataclass(frozen=True)
class Identity:
    """The server's answer: the token's project and, for a run id it holds, that run's last step."""

    project: str
    run_exists: bool
    run_last_step: int | None
    max_batch_events: int = COMPATIBLE_BATCH_EVENTS  # what a server that does not say takes
    max_batch_bytes: int = MAX_BATCH_BYTES  # the server's body limit (RUNCAST_MAX_BODY_BYTES), at most the SDK's
    columns: bool = False  # the server lists metrics_columns in its event_types: dense series may go as columns


def whoami(server: str, token: str | None, run_id: str | None, timeout: float, *,
           warn_unreachable: bool = True) -> Identity | None:
    """Ask ``server`` who ``token`` is; None when the server cannot be reached (or predates the route).
    ``warn_unreachable``: log that the run is spooled when the server cannot be reached (``init``)."""
    import httpx

    params = {"run": run_id} if run_id else None
    headers = {"User-Agent": "runcast-sdk"}
    if token:
        headers["Authorization"] = f"Bearer {token}"
    where = public_url(server.rstrip("/"))
    try:
        response = httpx.get(server.rstrip("/") + WHOAMI_PATH, params=params, headers=headers, timeout=timeout)
    except httpx.HTTPError as exc:
        if warn_unreachable:
            log.warning("runcast: the server at %s cannot be reached (%s); the run is spooled and sent when it answers",
                        where, type(exc).__name__)
        return None
    status = response.status_code
    if status in (404, 405, 501):  # a server (or proxy) without the route: send as before
        log.info("runcast: the server at %s cannot confirm tokens (HTTP %d); the run is sent as before", where, status)
        return None
    if status >= 500 or status in (408, 429):
        log.warning("runcast: the server at %s did not confirm the token (HTTP %d); the run is sent as it can",
                    where, status)
        return None
    if status == 401:
        hint = "no token given: pass token= or set RUNCAST_TOKEN" if not token else "the token is invalid or revoked"
        raise InitError(f"the server at {where} refused the token: {hint} (make one with `runcast token create`)")
    if status >= 300:
        raise InitError(f"the server at {where} refused this run: HTTP {status}: {_error_message(response.content)}")
    try:
        doc = response.json()
        _check_ingest(doc.get("scopes"), str(doc["project"]), where)
        return identity(doc)
    except (ValueError, KeyError, TypeError, AttributeError):
        log.warning("runcast: the server at %s answered whoami with something unexpected", where)
        return None


def identity(doc: dict[str, Any]) -> Identity:
    """The ``Identity`` a whoami answer (its JSON) gives, the batch limits kept within the SDK's own.
    Raises KeyError, TypeError or AttributeError for an answer of another shape."""
    run = doc.get("run")
    return Identity(
        project=str(doc["project"]),
        run_exists=run is not None,
        run_last_step=run.get("last_step") if run else None,
        max_batch_events=_batch_limit(doc.get("max_batch_events")),
        max_batch_bytes=_byte_limit(doc.get("max_body_bytes")),
        columns=_takes(doc.get("event_types"), COLUMNS_TYPE),
    )


def _check_ingest(scopes: object, project: str, where: str) -> None:
    """``InitError`` when the server lists the token's scopes (servers since issue 30) without ``ingest``."""
    if isinstance(scopes, list) and "ingest" not in scopes:
        has = ", ".join(str(s) for s in scopes) or "none"
        raise InitError(f"the server at {where} says this token of project {project!r} cannot send runs: it lacks "
                        f"the 'ingest' scope (it has: {has}); make one with "
                        f"`runcast token create --project {project} --scope ingest`")


def _batch_limit(said: object) -> int:
    """The batch size to send at most: what the server said, within what this SDK knows is safe."""
    if isinstance(said, bool) or not isinstance(said, int) or said < 1:
        return COMPATIBLE_BATCH_EVENTS
    return min(said, MAX_BATCH_EVENTS)



def _byte_limit(said: object) -> int:
    """The largest batch body to send: what the server takes, within the SDK's own limit."""
    if isinstance(said, bool) or not isinstance(said, int) or said < 1:
        return MAX_BATCH_BYTES
    return min(said, MAX_BATCH_BYTES)


def _takes(said: object, event_type: str) -> bool:
    """Whether the server lists ``event_type`` among the types it takes (a server that does not say: no)."""
    return isinstance(said, list) and event_type in said
