"""Opaque pagination cursors: URL-safe base64 of a small JSON list."""

from __future__ import annotations

import base64
import binascii
import json
from typing import Any

from runcast_server.errors import ApiError


def encode_cursor(*parts: Any) -> str:
    raw = json.dumps(list(parts), separators=(",", ":"), allow_nan=False).encode()
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


def decode_cursor(
    cursor: str, types: tuple[type, ...], field: str = "cursor"
) -> list[Any]:
    """The parts of a cursor made by ``encode_cursor``; anything else is a 422 naming ``field``."""
    try:
        padded = cursor + "=" * (-len(cursor) % 4)
        parts = json.loads(base64.urlsafe_b64decode(padded.encode()))
    except (binascii.Error, ValueError, UnicodeDecodeError):
        parts = None
    if not isinstance(parts, list) or len(parts) != len(types):
        raise ApiError(
            422, "malformed cursor: pass next_cursor back unchanged", field=field
        )
    out: list[Any] = []
    for part, kind in zip(parts, types, strict=True):
        if kind is float and isinstance(part, int) and not isinstance(part, bool):
            part = float(part)
        if not isinstance(part, kind) or isinstance(part, bool):
            raise ApiError(
                422, "malformed cursor: pass next_cursor back unchanged", field=field
            )
        out.append(part)
    return out
