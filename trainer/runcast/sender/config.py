"""How a run's sender (``sender.Sender``) batches, retries and identifies its run."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..wire import events


@dataclass(frozen=True)
class SenderConfig:
    """How a sender batches, retries and identifies its run."""

    run: str
    segment: str
    batch_size: int
    flush_interval: float  # 0: send as soon as the sender is idle
    heartbeat_interval: float
    retry_initial: float
    retry_max: float
    spool_dir: Path
    spool_meta: dict[str, Any]
    batch_bytes: int = events.MAX_BATCH_BYTES  # the server's body limit, within the SDK's
    columns: bool = False  # the server takes metrics_columns: dense series go as columns (wire.columns)
