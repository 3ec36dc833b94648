"""A source's run-level fields made to fit Runcast's: tags, notes, summary.

Every format shares these rules, so the runs list's tag filter, the run's notes and its
summary hold the same things whatever the source: a tag the wire cannot hold (longer than
``MAX_TAG_CHARS``, with a comma or a control character, past the ``MAX_TAGS``-th) is not
a run tag and is handed back to stay where the format keeps it (``env.tags``); notes longer
than the wire's limit are clipped; a summary keeps what the wire can hold.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from typing import Any

from runcast.wire.events import MAX_NOTE_CHARS, MAX_SUMMARY_BYTES, MAX_TAGS, EventError, check_json, check_tags


def split_tags(candidates: Iterable[str]) -> tuple[list[str], list[str]]:
    """(run tags, the rest): each candidate that is a valid tag, in order, up to ``MAX_TAGS``; duplicates once."""
    tags: list[str] = []
    rest: list[str] = []
    for tag in candidates:
        if tag in tags:
            continue
        try:
            check_tags([tag])
        except EventError:
            rest.append(tag)
            continue
        (tags if len(tags) < MAX_TAGS else rest).append(tag)
    return tags, rest


def clip_notes(text: str | None) -> str | None:
    """Notes as the wire holds them (at most ``MAX_NOTE_CHARS``, ending in "…" when clipped); None when blank."""
    if text is None or not text.strip():
        return None
    text = text.replace("\x00", "\ufffd").encode("utf-8", "replace").decode("utf-8")
    return text if len(text) <= MAX_NOTE_CHARS else text[: MAX_NOTE_CHARS - 1] + "…"


def clean_summary(raw: Mapping[str, Any]) -> dict[str, Any]:
    """The entries of a summary the wire can hold: non-finite floats as their strings ("NaN", ...), an
    entry that is not JSON the run can keep left out, and entries past ``MAX_SUMMARY_BYTES`` left out."""
    out: dict[str, Any] = {}
    for key, value in raw.items():
        entry = {str(key): _finite(value)}
        try:
            check_json({**out, **entry}, "summary", MAX_SUMMARY_BYTES)
        except EventError:
            continue
        out.update(entry)
    return out


def _finite(value: Any, depth: int = 0) -> Any:
    if isinstance(value, float) and not math.isfinite(value):
        return "NaN" if math.isnan(value) else ("Infinity" if value > 0 else "-Infinity")
    if depth < 64 and isinstance(value, dict):
        return {k: _finite(v, depth + 1) for k, v in value.items()}
    if depth < 64 and isinstance(value, list):
        return [_finite(v, depth + 1) for v in value]
    return value
