"""Renames (``run.name``, ``tags``, ``group``, ``notes``) sent to a server that predates them.

Such a server refuses a whole batch (422) when one of its ``update`` events carries only
those fields: its schema wants ``config``, ``summary`` or ``define``. The rest of that batch
must not be lost with it, so the refused update is sent again without them (or left out
when nothing else is in it), the user is told once, and later updates leave them out.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import Any

from .transport import Rejected

log = logging.getLogger("runcast")

DESCRIBED = ("name", "tags", "group", "notes")
FOLDED = ("config", "summary", "define")  # what every server takes in an update


class Renames:
    """Whether the server took the renames it was sent; one per sender (or ``runcast sync``)."""

    def __init__(self, where: str) -> None:
        self.where = where
        self.refused = False  # the server refused a rename: leave them out from now on

    def strip(self, events: Sequence[dict[str, Any]]) -> Sequence[dict[str, Any]]:
        """``events`` as this server takes them: once it refused a rename, updates without renames."""
        if not self.refused or not any(e.get("type") == "update" for e in events):
            return events
        return [kept for e in events if (kept := _without_renames(e)) is not None]

    def retry(self, events: Sequence[dict[str, Any]], refusal: Rejected) -> Sequence[dict[str, Any]] | None:
        """The batch to send instead of ``events`` when ``refusal`` is an old server's refusal of
        the renames of one of them; None when it is not (the refusal stands)."""
        i = refusal.index
        if refusal.status != 422 or i is None or not 0 <= i < len(events):
            return None
        event = events[i]
        if event.get("type") != "update" or not any(k in event for k in DESCRIBED):
            return None
        if not self.refused:
            self.refused = True
            log.warning("runcast: the server at %s does not take run renames (run.name, tags, group, notes: %s); "
                        "they are not recorded there, everything else is", self.where, refusal)
        return self.strip(events)


def _without_renames(event: dict[str, Any]) -> dict[str, Any] | None:
    if event.get("type") != "update" or not any(k in event for k in DESCRIBED):
        return event
    kept = {k: v for k, v in event.items() if k not in DESCRIBED}
    return kept if any(k in kept for k in FOLDED) else None
