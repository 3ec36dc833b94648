"""``RunStats``: the event counts of a run (``run.stats``)."""

from __future__ import annotations

from dataclasses import dataclass, field

from .media_worker import MediaStats
from .sender.upload_jobs import UploadStats


@dataclass(frozen=True)
class RunStats:
    """Event counts of a run (every event type, including run_started, heartbeats, finished).

    ``logged``: accepted by the run. ``sent``: acknowledged by the service (``replayed``
    of them from the spool). ``spooled``: written to the spool. ``spilled``: written to
    the overflow file by ``log()`` because the queue was full or behind (they are sent
    from there in order). ``dropped``: lost, because the service rejected them or the
    disk could not take them (each cause is logged once); the run reports the count to
    the service, and its page shows the hole. ``queued``: waiting in memory right now.
    ``ignored``: metric values ``log()`` left out because their key was already logged at
    that step or a later one (one warning per key). ``media``: images and histograms, which
    the media worker prepares (their events count in ``logged`` once queued).
    """

    logged: int
    sent: int
    spooled: int
    dropped: int
    replayed: int
    queued: int
    spilled: int = 0
    ignored: int = 0  # metric values log() left out: a step at or below the key's last one (docs/sdk.md)
    uploads: UploadStats = field(default_factory=UploadStats)  # checkpoints published over HTTP (upload.py)
    media: MediaStats = field(default_factory=MediaStats)  # images and histograms (media_worker.py)

    @property
    def has_hole(self) -> bool:
        """True when some events of this run will never reach the service."""
        return self.dropped > 0
