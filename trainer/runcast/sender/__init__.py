"""The sender: how a run's events leave the training process.

The training thread puts items on the queue (``outbox``; past ``max_queue``, the ``overflow``
file) and returns; the sender thread (``thread.Sender``, its mutable state in one
``thread.SenderState``) encodes them (``encode``), cuts batches (``batches``) and hands them to
the ``transport``; while the server is away they go to the ``spool`` and are replayed
(``spool_replay``, ``spool_blobs``, ``backoff``, ``renames``). Checkpoints are uploaded on a
thread of their own (``upload``, ``upload_jobs``, ``blob_http``). ``runcast sync`` sends a spool
left behind (``spool_report`` says how).
"""

from __future__ import annotations

from .config import SenderConfig
from .thread import Sender

__all__ = ["Sender", "SenderConfig"]
