"""What a run and its upload worker (``upload.py``) exchange: the settings ``init`` makes,
one job per ``run.checkpoint()`` call, and the counts ``run.stats.uploads`` shows."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class UploadStats:
    """Checkpoints published over HTTP (``run.stats.uploads``).

    ``pending``: submitted, not finished yet. ``done``: recorded by the server (uploaded,
    or found in place). ``failed``: refused for good (see the log). ``bytes_total``: size
    of every checkpoint submitted; ``bytes_done``: of those, held by the server (including
    bytes an earlier, interrupted attempt stored); ``bytes_sent``: sent by this process.
    """

    pending: int = 0
    done: int = 0
    failed: int = 0
    bytes_total: int = 0
    bytes_done: int = 0
    bytes_sent: int = 0


@dataclass(frozen=True)
class UploadConfig:
    """Where and how fast to upload; made by ``init``."""

    server: str
    token: str | None
    bandwidth: float | None = None  # bytes per second; None: as fast as the link goes
    retry_initial: float = 0.5
    retry_max: float = 30.0
    timeout: float = 120.0


@dataclass
class Job:
    """One ``run.checkpoint()`` call to publish: its event fields, reserved on the training thread."""

    path: str
    step: int
    seq: int
    ts: float
    size: int
    is_dir: bool
    metrics: dict[str, Any]
    public: bool
    files: list[tuple[str, str, int, str]] = field(default_factory=list)  # (rel, absolute, size, sha256)
    source: str | None = None  # hard links to the files as they were at checkpoint() (read instead of path)
    snapshot: str | None = None  # the directory holding those links, removed once the job is settled
