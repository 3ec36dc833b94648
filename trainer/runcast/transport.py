"""``runcast.transport``: the documented home of the ``Transport`` protocol a custom
``init(transport=...)`` implements (docs/sdk.md), and the errors it raises. The code lives in
``runcast.sender.transport``."""

from __future__ import annotations

from .sender.transport import Rejected, Retryable, Transport, TransportError

__all__ = ["Rejected", "Retryable", "Transport", "TransportError"]
