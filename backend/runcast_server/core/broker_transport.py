"""kombu's Redis transport, dropping an entry of the queue that is not a kombu message
instead of ending the worker.

The transport pops an entry (BRPOP), decodes it as a JSON envelope (body, headers,
properties) and builds a message from it (the body's base64, its decompression), all in
the worker's main process, where an exception ends the worker. Those steps come before
the message counts as unacknowledged, so an entry that fails them was already off the
queue: it is logged and dropped. Messages that pass are checked again, with the limits,
by the task class (``core.screened_task``). ``celery_app`` uses this transport for
``redis://`` and ``rediss://`` broker URLs.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Mapping
from typing import Any

from kombu.transport import redis, virtual

from runcast_server.core.message_checks import Unreadable

log = logging.getLogger(__name__)


class Message(virtual.Message):
    """kombu's message, refusing (``Unreadable``) an envelope it could not be built from."""

    def __init__(self, payload: Any, channel: Any = None, **kwargs: Any) -> None:
        if not isinstance(payload, Mapping) or not isinstance(payload.get("properties"), Mapping):
            raise Unreadable("the entry is not a kombu message (an object with properties)")
        headers = payload.get("headers")
        found = headers.get("id") if isinstance(headers, Mapping) else None
        message = f"message {str(found)[:200]}" if found else "a message without id"
        if isinstance(headers, Mapping) and headers.get("compression"):
            raise Unreadable(f"{message}: its body is compressed; no Runcast producer compresses, and decompressing "
                             "is unbounded")
        try:
            super().__init__(payload, channel=channel, **kwargs)
        except (KeyError, TypeError, ValueError) as exc:  # a missing delivery tag, a body that is not base64, ...
            raise Unreadable(f"{message}: not a kombu message: {type(exc).__name__}: {str(exc)[:300]}") from None


class Channel(redis.Channel):
    """kombu's channel, dropping what ``Message`` refuses or what is not JSON at all."""

    Message = Message

    def _brpop_read(self, **options: Any) -> Any:
        self.connection.delivering = False
        try:
            return super()._brpop_read(**options)
        except Unreadable as exc:
            log.error("broker: dropped an entry of the queue: %s", exc)
        except (json.JSONDecodeError, RecursionError) as exc:
            if self.connection.delivering:  # raised after the envelope was decoded: not ours to drop
                raise
            log.error("broker: dropped an entry of the queue that is not a JSON envelope (so it has no id): %s: %s",
                      type(exc).__name__, str(exc)[:300])
        return True


class Transport(redis.Transport):
    """kombu's Redis transport with ``Channel``; ``delivering``: the entry being read was decoded."""

    Channel = Channel
    delivering = False

    def _deliver(self, message: Any, queue: str) -> None:
        self.delivering = True
        super()._deliver(message, queue)
