"""The Celery task class of every Runcast task: the worker's main process screens each message
(``core.message_checks``) before Celery decodes it or hands it to a pool process.

A message that fails is acknowledged and never run, so it is never re-queued. The worker
logs it (task, message id, why) and sends ``runcast.inbox.quarantine`` with that
description and the body's first bytes; a pool process records it as a quarantined inbox
row (``runcast quarantine list``, ``/api/v1/admin/inbox``). The main process itself never
touches the database: its pool processes are forked from it.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from typing import Any, Final

from celery import Celery, Task
from celery.worker.strategy import default
from kombu.message import Message

from runcast_server.core.celery_app import settings_of
from runcast_server.core.message_checks import Unreadable, check_body, check_payload, check_tree
from runcast_server.core.settings import Settings

QUARANTINE_TASK: Final = "runcast.inbox.quarantine"
EXCERPT_BYTES: Final = 300
ID_CHARS: Final = 200

log = logging.getLogger(__name__)


class ScreenedTask(Task):
    """Celery's Task with the screening strategy (``celery_app`` makes it the app's task class)."""

    Strategy = "runcast_server.core.screened_task:screened"


def max_message_bytes(settings: Settings) -> int:
    """The largest message body a worker takes: a contract-1 message holds a batch re-encoded
    by kombu's JSON, which escapes non-ASCII text (at most 3 times its UTF-8 bytes)."""
    return 4 * settings.max_body_bytes


def screened(task: Task, app: Celery, consumer: Any, **kwargs: Any) -> Callable[..., Any]:
    """Celery's default strategy for ``task``, behind ``check_message``."""
    handle = default(task, app, consumer, **kwargs)
    max_bytes = max_message_bytes(settings_of(app))

    def screen(message: Message, body: Any, ack: Any, reject: Any, callbacks: Any, **more: Any) -> Any:
        try:
            check_message(message, max_bytes)
        except Unreadable as exc:
            ack(log, consumer.connection_errors)
            refuse(app, task.name, message, str(exc))
            return None
        return handle(message, body, ack, reject, callbacks, **more)

    return screen


def check_message(message: Message, max_bytes: int) -> None:
    """Raise ``Unreadable`` unless ``message``'s headers, properties and body can be decoded and
    pickled safely and the body is a task message."""
    check_tree(message.headers, "headers")
    check_tree(message.properties, "properties")
    check_body(message.body, message.content_type, max_bytes)
    try:
        payload = message.payload  # kombu's decoding (cached for Celery); the accepted content types
    except Exception as exc:  # noqa: BLE001 - kombu's DecodeError, ContentDisallowed, whatever a body makes it raise
        raise Unreadable(f"its body cannot be decoded: {type(exc).__name__}: {exc}"[:EXCERPT_BYTES]) from None
    check_payload(payload)


def refuse(app: Celery, task_name: str, message: Message, reason: str) -> None:
    """Log a refused message and have it recorded as a quarantined inbox row."""
    headers, properties = message.headers, message.properties
    found = (headers.get("id") if isinstance(headers, Mapping) else None) or (
        properties.get("correlation_id") if isinstance(properties, Mapping) else None)
    message_id = str(found)[:ID_CHARS]
    body = message.body if isinstance(message.body, bytes) else b""
    excerpt = body[:EXCERPT_BYTES].decode("utf-8", "replace")
    log.error("broker: refused message %s of %s: %s; acknowledged, not run; quarantined for the operator",
              message_id, task_name, reason, extra={"message_id": message_id})
    try:
        app.send_task(QUARANTINE_TASK, kwargs={"message_id": message_id, "task": task_name, "reason": reason,
                                               "excerpt": excerpt})
    except Exception:  # noqa: BLE001 - the broker went away: the log line above is the record
        log.exception("broker: could not send the quarantine record of message %s", message_id)
