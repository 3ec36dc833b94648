"""Telling the server that a segment's events wait in a local spool (``PUT .../segments/{segment}/spool``).

``finish()`` reports the count when its timeout leaves events on disk, and ``runcast sync``
reports what is left after it sent a spool (0, or the events the server refused), so the run's
page and API say that points exist that the server does not hold yet. Best effort: a server
that cannot be reached, or predates the route, is not told, and nothing else changes.
"""

from __future__ import annotations

import logging
from typing import Final

log = logging.getLogger("runcast")

REPORT_TIMEOUT: Final = 2.0


def spool_path(run: str, segment: str) -> str:
    """The route of a segment's spool report, under ``/api/v1``."""
    return f"/runs/{run}/segments/{segment}/spool"


def report_spooled(server: str, token: str | None, run: str, segment: str, events: int,
                   timeout: float = REPORT_TIMEOUT) -> bool:
    """Report that ``events`` of the segment wait in a spool; True when the server took it."""
    import httpx

    headers = {"User-Agent": "runcast-sdk", **({"Authorization": f"Bearer {token}"} if token else {})}
    url = f"{server.rstrip('/')}/api/v1{spool_path(run, segment)}"
    try:
        response = httpx.put(url, json={"events": events}, headers=headers, timeout=timeout)
    except httpx.HTTPError as exc:
        log.debug("runcast: the spool of run %s was not reported (%s)", run, type(exc).__name__)
        return False
    if response.status_code != 200:
        log.debug("runcast: the spool of run %s was not reported (HTTP %d)", run, response.status_code)
        return False
    return True
