"""``Parts``: one spooled batch sent in the parts the service takes (halved when it says a part is
too large; an update an old server refuses for its renames sent again without them). A part cut
from a columnar body is columnar too (a server that refuses the form gets it one event per step).
Used by the replay (``spool_replay``) and by the images' sending (``spool_blobs``)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ..wire import events as schema
from .batches import Batch, batch_bodies, is_columnar
from .renames import Renames
from .transport import Rejected, Transport


class Parts:
    """Sends batches in parts the service takes; learns its limit from its answers."""

    def __init__(self, max_events: int, max_bytes: int = schema.MAX_BATCH_BYTES, renames: Renames | None = None,
                 on_commands: Callable[[list[dict[str, Any]]], None] | None = None) -> None:
        self.limit = max(1, max_events)
        self.max_bytes = max_bytes
        self.renames = renames
        self.on_commands = on_commands  # the team's commands an answer carries (a live run's replay takes them)

    def send(
        self, transport: Transport, body: bytes, events: list[dict[str, Any]], timeout: float, stop_on: tuple[int, ...]
    ) -> tuple[int, list[tuple[bytes, int, Rejected]]]:
        """(events stored, the parts refused for good with the service's answer); raises Retryable,
        and Rejected for a status in ``stop_on``."""
        todo: list[Batch] = [(body, events)] if len(events) <= self.limit and len(body) <= self.max_bytes \
            else batch_bodies(events, self.limit, self.max_bytes, columns=is_columnar(body))
        todo.reverse()  # a stack: the next part last
        sent = 0
        refused: list[tuple[bytes, int, Rejected]] = []
        while todo:
            part_body, part = todo.pop()
            try:
                commands = transport.send(part_body, part, timeout)
            except Rejected as exc:
                if is_columnar(part_body) and exc.status == 422 and not exc.too_large:  # a server that does not take columns: per event
                    todo.append((schema.dumps_batch(part), part))
                    continue
                if exc.status in stop_on:
                    raise
                if exc.too_large and len(part) > 1:
                    if exc.status == 413:  # too many bytes
                        self.max_bytes = min(self.max_bytes, len(part_body) // 2)
                    else:  # too many events
                        self.limit = min(self.limit, len(part) // 2)
                    todo.extend(reversed(batch_bodies(part, self.limit, self.max_bytes, columns=is_columnar(part_body))))
                    continue
                kept = self.renames.retry(part, exc) if self.renames is not None else None
                if kept is not None:  # an old server refused a rename: the rest goes without it
                    todo.extend(reversed(batch_bodies(kept, self.limit, self.max_bytes, columns=is_columnar(part_body)))
                                if kept else [])
                    continue
                refused.append((part_body, len(part), exc))
            else:
                sent += len(part)
                if commands and self.on_commands is not None:
                    self.on_commands(commands)
        return sent, refused
