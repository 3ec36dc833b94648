"""``SenderState``: everything a run's sender changes while it runs, in one place (what ``Sender``
holds besides it is fixed when the run starts)."""

from __future__ import annotations

import threading
from dataclasses import dataclass, field

from .slots import SendSlots
from .spool import Spool


@dataclass
class SenderState:
    """The sender's mutable state; the sender thread changes it, the training thread reads it (and
    sets ``deadline`` and ``requested`` under ``cond``)."""

    spooling: bool
    """Batches go to the spool (no transport, an outage, or images waiting there)."""
    spool: Spool | None
    """The run's spool (made with the run, or on first need)."""
    spooled_events: int = 0
    """Events in the spool's unsent batches."""
    retry_at: float = 0.0
    """When the next replay of the spool is tried (``time.monotonic``)."""
    slots: SendSlots = field(default_factory=SendSlots)
    """When events may leave the queue next (``flush_interval`` 0)."""
    last_flush: float = 0.0
    """When the queue was last flushed (the start of ``flush_interval``)."""
    last_sync: float = 0.0
    """When the overflow file was last fsync'd."""
    next_heartbeat: float = 0.0
    """When the next heartbeat is due."""
    lost_reported: int = 0
    """Lost events the last heartbeat reported (a new hole is reported at once)."""
    deadline: float | None = None
    """Set by ``close``: deliver until then, spool the rest."""
    requested: int = 0
    """``flush`` calls so far (under ``cond``)."""
    served: int = 0
    """``flush`` calls served (under ``cond``)."""
    told: set[str] = field(default_factory=set)
    """Warnings given once per run: ``rejected``, ``offline``, ``outage``, ``spool_error``."""
    cond: threading.Condition = field(default_factory=threading.Condition)

    def first(self, warning: str) -> bool:
        """True the first time ``warning`` is given (then it is not given again)."""
        if warning in self.told:
            return False
        self.told.add(warning)
        return True
