"""Opaque pagination cursors: URL-safe base64 of a small JSON list."""

from __future__ import annotations

import base64
import binascii
import json
import math
from typing import Any

from runcast.events import EventError, check_text

from runcast_server.core.errors import Invalid


def _text_ok(text: str) -> bool:
    try:
        check_text(text, "cursor")
    except EventError:
        return False
    return True


def encode_cursor(*parts: Any) -> str:
    raw = json.dumps(list(parts), separators=(",", ":"), allow_nan=False).encode()
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


def decode_cursor(
    cursor: str, types: tuple[type, ...], field: str = "cursor"
) -> list[Any]:
    """The parts of a cursor made by ``encode_cursor``; anything else is ``Invalid`` naming ``field``."""
    try:
        padded = cursor + "=" * (-len(cursor) % 4)
        parts = json.loads(base64.urlsafe_b64decode(padded.encode()))
    except (binascii.Error, ValueError, UnicodeDecodeError):
        parts = None
    if not isinstance(parts, list) or len(parts) != len(types):
        raise Invalid("malformed cursor: pass next_cursor back unchanged", field=field)
    out: list[Any] = []
    for part, kind in zip(parts, types, strict=True):
        if kind is float and isinstance(part, int) and not isinstance(part, bool) and abs(part) <= 2**53:
            part = float(part)
        if (
            not isinstance(part, kind)
            or isinstance(part, bool)
            or (isinstance(part, float) and not math.isfinite(part))
            or (isinstance(part, str) and not _text_ok(part))
        ):
            raise Invalid("malformed cursor: pass next_cursor back unchanged", field=field)
        out.append(part)
    return out
