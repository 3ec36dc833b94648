"""Telling the server that a segment's events wait in a local spool (``PUT .../segments/{segment}/spool``).

``finish()`` reports the count when its timeout leaves events on disk, and ``runcast sync``
reports what is left after it sent a spool (0, or the events the server refused), so the run's
page and API say that points exist that the server does not hold yet. Best effort: a server
that cannot be reached, or predates the route, is not told, and nothing else changes.
"""

from __future__ import annotations

import logging
import os
import shlex
from pathlib import Path
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


def announce_unsent(run: str, segment: str, where: Path, unsent: int, waited: float, *, offline: bool,
                    api: tuple[str, str | None] | None) -> None:
    """After ``finish()`` left events on disk: say how many and the exact command that sends them
    (on the ``runcast`` logger: the trainer's terminal), and tell the server."""
    if offline:
        log.warning("runcast: run %s was recorded offline in %s (%s events). Send it with: runcast sync %s "
                    "--server URL", run, where, f"{unsent:,}", shlex.quote(str(where)))
        return
    command = f"runcast sync {shlex.quote(str(where))}"
    token = api[1] if api is not None else None
    if token and os.environ.get("RUNCAST_TOKEN") != token:
        command = "RUNCAST_TOKEN=<the token given to init> " + command
    log.warning("runcast: run %s could not send everything within %g s: %s events are kept on disk in %s. "
                "Send them with: %s", run, waited, f"{unsent:,}", where, command)
    if api is not None:
        report_spooled(api[0], api[1], run, segment, unsent)
