"""The checks of single fields, shared by every event type (``runcast.wire.bodies``) and by the
SDK's verbs: ``EventError``, the wire form of floats, and the checks of metric names, text,
integers, steps, JSON objects, tags and metric declarations.

This module uses only the standard library: the SDK and the backend import it.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Mapping
from typing import Any, Final, Literal, overload

from .limits import (
    CONTROL_RE,
    MAX_INT,
    MAX_JSON_DEPTH,
    MAX_KEY_BYTES,
    MAX_METRICS_PER_EVENT,
    MAX_STEP,
    MAX_TAG_CHARS,
    MAX_TAGS,
    SUMMARIES,
    X_AXES,
)

_SURROGATE_RE: Final = re.compile("[\ud800-\udfff]")

# The wire strings of the non-finite floats (encode_value writes them, decode_value and the importers read them).
NONFINITE: Final = {"NaN": math.nan, "Infinity": math.inf, "-Infinity": -math.inf}

# Metric names and run/segment ids that passed their check: a batch repeats the same few
# in every event, and the server validates hundreds of thousands of events a minute.
# Only strings that passed are added; the sets are emptied when they grow past the limit.
_GOOD_KEYS: set[str] = set()
GOOD_IDS: set[str] = set()
_GOOD_MAX: Final = 4096


class EventError(ValueError):
    """An event, or a field of one, breaks the schema.

    ``index`` is the event's position in its batch (None outside a batch) and
    ``field`` the offending field, dotted for nested ones (``values.loss``).
    """

    def __init__(self, field: str, message: str, index: int | None = None) -> None:
        super().__init__(message)
        self.field = field
        self.message = message
        self.index = index

    def __str__(self) -> str:
        where = f"event {self.index}, " if self.index is not None else ""
        return f"{where}field {self.field!r}: {self.message}"

    def as_dict(self) -> dict[str, Any]:
        return {"index": self.index, "field": self.field, "message": self.message}


def encode_value(value: float) -> float | str:
    """A float as it travels: finite as a number, NaN and +-Inf as strings."""
    if math.isfinite(value):
        return value
    if math.isnan(value):
        return "NaN"
    return "Infinity" if value > 0 else "-Infinity"


def decode_value(raw: Any, field: str = "value") -> float:
    """The float a wire value stands for; raises EventError for anything else."""
    if isinstance(raw, bool):
        raise EventError(field, "must be a number, not a boolean")
    if isinstance(raw, float):
        return raw
    if isinstance(raw, int):
        try:
            return float(raw)
        except OverflowError:
            raise EventError(field, "integer too large for a float") from None
    if isinstance(raw, str) and raw in NONFINITE:
        return NONFINITE[raw]
    raise EventError(
        field,
        f"must be a number (or 'NaN', 'Infinity', '-Infinity'), got {type(raw).__name__}",
    )


def check_key(key: Any, field: str = "values") -> str:
    """Validate a metric name: 1..200 UTF-8 bytes, no control characters."""
    if not isinstance(key, str):
        raise EventError(
            field, f"metric names must be strings, got {type(key).__name__}"
        )
    if not key:
        raise EventError(field, "metric name must not be empty")
    if not key.isascii() and _SURROGATE_RE.search(key):
        raise EventError(f"{field}.{key[:40]!a}", "metric name holds a lone surrogate (not Unicode text)")
    if len(key.encode("utf-8")) > MAX_KEY_BYTES:
        raise EventError(
            f"{field}.{key[:40]}", f"metric name longer than {MAX_KEY_BYTES} bytes"
        )
    if CONTROL_RE.search(key):
        raise EventError(f"{field}.{key!r}", "metric name contains control characters")
    remember(_GOOD_KEYS, key)
    return key


def remember(good: set[str], value: str) -> None:
    if len(good) >= _GOOD_MAX:
        good.clear()
    good.add(value)


def check_text(value: str, field: str) -> str:
    """Refuse text that UTF-8 or a database cannot hold: a lone surrogate or a NUL character."""
    if "\x00" in value:
        raise EventError(field, "holds a NUL character")
    if not value.isascii() and _SURROGATE_RE.search(value):
        raise EventError(field, "holds a lone surrogate (not a Unicode scalar value)")
    return value


@overload
def check_int(raw: Any, field: str, *, low: int = 0, high: int = MAX_INT, optional: Literal[False] = False) -> int: ...
@overload
def check_int(raw: Any, field: str, *, low: int = 0, high: int = MAX_INT, optional: bool) -> int | None: ...


def check_int(raw: Any, field: str, *, low: int = 0, high: int = MAX_INT, optional: bool = False) -> int | None:
    """Validate an integer in [low, high] (booleans are not integers)."""
    if raw is None and optional:
        return None
    if isinstance(raw, bool) or not isinstance(raw, int):
        raise EventError(field, f"must be an integer, got {type(raw).__name__}")
    if not low <= raw <= high:
        raise EventError(field, f"must be an integer in [{low}, {high}]")
    return raw


def check_json(raw: Any, field: str, max_bytes: int) -> dict[str, Any]:
    """Validate a JSON object: depth, text, numbers, then its encoded size.

    Iterative, so a hostile nesting depth costs no recursion before it is refused.
    """
    if not isinstance(raw, dict):
        raise EventError(field, "must be a JSON object")
    stack: list[tuple[Any, int, str]] = [(raw, 1, field)]
    while stack:
        value, depth, where = stack.pop()
        if isinstance(value, dict):
            if depth > MAX_JSON_DEPTH:
                raise EventError(where, f"nested more than {MAX_JSON_DEPTH} levels deep")
            for key, item in value.items():
                if not isinstance(key, str):
                    raise EventError(where, "object keys must be strings")
                check_text(key, where)
                stack.append((item, depth + 1, f"{where}.{key[:40]}" if depth < 8 else where))
        elif isinstance(value, list):
            if depth > MAX_JSON_DEPTH:
                raise EventError(where, f"nested more than {MAX_JSON_DEPTH} levels deep")
            stack.extend((item, depth + 1, where) for item in value)
        elif isinstance(value, str):
            check_text(value, where)
        elif isinstance(value, bool) or value is None:
            pass
        elif isinstance(value, int):
            if not -MAX_INT <= value <= MAX_INT:
                raise EventError(where, f"integers must lie in [-{MAX_INT}, {MAX_INT}]")
        elif isinstance(value, float):
            if not math.isfinite(value):
                raise EventError(where, "numbers must be finite")
        else:
            raise EventError(where, f"{type(value).__name__} is not JSON")
    size = len(json.dumps(raw, allow_nan=False, separators=(",", ":")).encode())
    if size > max_bytes:
        raise EventError(field, f"encodes to {size} bytes, more than {max_bytes}")
    return raw


@overload
def check_step(raw: Any, field: str = "step", *, optional: Literal[False] = False) -> int: ...
@overload
def check_step(raw: Any, field: str = "step", *, optional: bool) -> int | None: ...


def check_step(raw: Any, field: str = "step", *, optional: bool = False) -> int | None:
    """Validate a step: an integer in [0, 2**53)."""
    if raw is None and optional:
        return None
    if isinstance(raw, bool) or not isinstance(raw, int):
        raise EventError(field, f"must be an integer, got {type(raw).__name__}")
    if raw < 0:
        raise EventError(field, "must not be negative")
    if raw > MAX_STEP:
        raise EventError(field, f"must be at most {MAX_STEP}")
    return raw



def check_tags(raw: Any, field: str = "tags") -> list[str]:
    """A list of distinct tags (order kept): 1..64 characters, no control characters, no commas."""
    if not isinstance(raw, list):
        raise EventError(field, "must be a list of strings")
    if len(raw) > MAX_TAGS:
        raise EventError(field, f"holds {len(raw)} tags, more than {MAX_TAGS}")
    out: list[str] = []
    for i, tag in enumerate(raw):
        where = f"{field}.{i}"
        if not isinstance(tag, str) or not tag.strip():
            raise EventError(where, "must be a non-empty string")
        if len(tag) > MAX_TAG_CHARS:
            raise EventError(where, f"longer than {MAX_TAG_CHARS} characters")
        if CONTROL_RE.search(tag) or "," in tag:
            raise EventError(where, "must hold no control characters and no commas")
        check_text(tag, where)
        if tag not in out:
            out.append(tag)
    return out


def check_define(raw: Any, field: str = "define") -> dict[str, dict[str, str]]:
    """Metric declarations: name -> {"x": one of X_AXES, "summary": one of SUMMARIES}."""
    if not isinstance(raw, dict) or not raw:
        raise EventError(field, "must be a non-empty JSON object of metric name -> declaration")
    if len(raw) > MAX_METRICS_PER_EVENT:
        raise EventError(field, f"holds {len(raw)} entries, more than {MAX_METRICS_PER_EVENT}")
    out: dict[str, dict[str, str]] = {}
    for key, decl in raw.items():
        check_key(key, field)
        if not isinstance(decl, dict):
            raise EventError(f"{field}.{key}", "must be an object with 'x' and 'summary'")
        out[key] = {
            "x": choice(decl, "x", X_AXES, "step"),
            "summary": choice(decl, "summary", SUMMARIES, "last"),
        }
    return out


# --- fields of an event ------------------------------------------------------------


def text_field(event: Mapping[str, Any], field: str, max_chars: int) -> str:
    """``event[field]``: a string of at most ``max_chars`` characters that a store can hold."""
    raw = event.get(field)
    if not isinstance(raw, str):
        raise EventError(field, "must be a string")
    if len(raw) > max_chars:
        raise EventError(field, f"longer than {max_chars} characters")
    return check_text(raw, field)


def json_field(event: Mapping[str, Any], field: str, max_bytes: int) -> dict[str, Any]:
    """``event[field]``: a JSON object of at most ``max_bytes`` encoded (``{}`` when absent)."""
    raw = event.get(field)
    if raw is None:
        return {}
    return check_json(raw, field, max_bytes)


def number_map(
    raw: Any, field: str, max_entries: int, *, allow_empty: bool
) -> dict[str, float]:
    """A JSON object of metric name -> number, the numbers decoded to floats."""
    if not isinstance(raw, dict):
        raise EventError(field, "must be a JSON object of name -> number")
    if not raw and not allow_empty:
        raise EventError(field, "must hold at least one entry")
    if len(raw) > max_entries:
        raise EventError(field, f"holds {len(raw)} entries, more than {max_entries}")
    out: dict[str, float] = {}
    good = _GOOD_KEYS
    for key, value in raw.items():
        if type(key) is not str or key not in good:
            check_key(key, field)
        # A float needs no decoding (and no field name for an error): the usual value.
        out[key] = value if type(value) is float else decode_value(value, f"{field}.{key}")
    return out


def choice(
    event: Mapping[str, Any],
    field: str,
    choices: tuple[str, ...],
    default: str | None = None,
) -> str:
    """``event[field]`` (``default`` when absent): one of ``choices``."""
    raw = event.get(field, default)
    if not isinstance(raw, str) or raw not in choices:
        raise EventError(field, f"must be one of {', '.join(choices)}")
    return raw

