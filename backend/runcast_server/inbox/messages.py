"""The ingest task's message, read into one of its contracts (docs/CONTRACTS.md).

``Current`` (contract 2: an inbox id), ``Legacy`` (contract 1: the events themselves, from
the previous release), or ``Foreign`` (a number this worker does not speak). Anything else
raises ``Unreadable``: the task quarantines it. The worker's main process has already
bounded the message's size and depth (``core.screened_task``).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Final, TypeGuard

from runcast_server.core.message_checks import Unreadable

CONTRACT: Final = 2
MAX_ID: Final = 2**63 - 1


@dataclass(frozen=True)
class Current:
    inbox_id: int


@dataclass(frozen=True)
class Legacy:
    events: list[Any]
    project_id: int | None
    token: str | None
    received_at: float | None


@dataclass(frozen=True)
class Foreign:
    contract: int


def read(message: Mapping[str, Any]) -> Current | Legacy | Foreign:
    """The contract of ``message`` (the task's keyword arguments), its fields checked."""
    contract = message.get("contract")
    if contract is None and "events" in message:
        return _legacy(message)
    if not _is_int(contract):
        raise Unreadable(f"'contract' is {_kind(contract)}, not a task contract number")
    if contract != CONTRACT:
        return Foreign(contract)
    inbox_id = message.get("inbox_id")
    if not _is_int(inbox_id) or not 1 <= inbox_id <= MAX_ID:
        raise Unreadable(f"'inbox_id' is {_kind(inbox_id)}, not an inbox row id")
    return Current(inbox_id)


def _legacy(message: Mapping[str, Any]) -> Legacy:
    events, project_id = message["events"], message.get("project_id")
    token, received_at = message.get("token"), message.get("received_at")
    if not isinstance(events, list):
        raise Unreadable(f"'events' is {_kind(events)}, not a list")
    if project_id is not None and not (_is_int(project_id) and 1 <= project_id <= MAX_ID):
        raise Unreadable(f"'project_id' is {_kind(project_id)}, not a project id")
    if token is not None and not isinstance(token, str):
        raise Unreadable(f"'token' is {_kind(token)}, not a string")
    if received_at is not None and not (isinstance(received_at, (int, float)) and not isinstance(received_at, bool)
                                        and math.isfinite(received_at)):
        raise Unreadable(f"'received_at' is {_kind(received_at)}, not a time")
    return Legacy(events, project_id, token, None if received_at is None else float(received_at))


def _is_int(value: Any) -> TypeGuard[int]:
    return isinstance(value, int) and not isinstance(value, bool)


def _kind(value: Any) -> str:
    """What a value is, briefly (never its whole text)."""
    if value is None:
        return "missing"
    text = repr(value) if isinstance(value, (int, float, str)) else type(value).__name__
    return text if len(text) <= 40 else text[:40] + "..."
