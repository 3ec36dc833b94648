"""Checks of a broker task message, made before anything decodes, copies or pickles it.

Celery's worker decodes a task message in its main process, then pickles the decoded
arguments (and the message's headers and properties) to a pool process. Both recurse once
per nesting level: a message nested a few hundred levels deep raises RecursionError in the
main process, which kills the worker; the message, acknowledged late, goes back on the
queue and kills every restart. These checks bound a message's size and nesting depth
without recursing, then its shape, so that whatever passes can be decoded and pickled
safely. What fails raises ``Unreadable``, whose message says why.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any, Final

# A batch's JSON objects nest at most 64 levels (runcast.wire.limits.MAX_JSON_DEPTH), 4 levels down in
# a task message ([args, kwargs, options] > kwargs > events > event); decoding and pickling
# recurse into trouble near 1000 levels.
MAX_DEPTH: Final = 100
# Celery's headers and properties are a few hundred bytes (argsrepr and kwargsrepr are cut at 1 KiB).
MAX_META_BYTES: Final = 1 << 20
JSON: Final = "application/json"

# Every byte but quotes and brackets; a string once only those are left; curly brackets as square ones.
_NOT_STRUCTURE: Final = bytes(c for c in range(256) if c not in b'[]{}"')
_STRING: Final = re.compile(rb'"[^"]*"')
_SQUARE: Final = bytes.maketrans(b"{}", b"[]")


class Unreadable(ValueError):
    """A broker message that no task may see; the message says why."""


def check_body(body: bytes, content_type: str | None, max_bytes: int) -> None:
    """Refuse a body that is not JSON, larger than ``max_bytes`` or nested deeper than ``MAX_DEPTH``."""
    if content_type != JSON:
        raise Unreadable(f"content type {content_type!r}: this worker reads {JSON} only")
    if not isinstance(body, bytes):
        raise Unreadable(f"the body is {type(body).__name__}, not bytes")
    if len(body) > max_bytes:
        raise Unreadable(f"the body is {len(body)} bytes, more than the {max_bytes} a task message may hold")
    if nesting_depth(body, MAX_DEPTH) > MAX_DEPTH:
        raise Unreadable(f"the body nests more than {MAX_DEPTH} levels deep")


def nesting_depth(text: bytes, limit: int) -> int:
    """How deep the brackets of JSON ``text`` nest outside its strings, counted up to ``limit + 1``.

    No recursion, and no loop over the text in Python: the bytes methods cut the strings
    out, then remove the innermost pairs of brackets, a level a pass.
    Raises ``Unreadable`` when the brackets do not balance.
    """
    brackets = _brackets(text)
    too_deep = b"[" * (limit + 1)
    depth = 0
    while brackets and depth <= limit:
        if too_deep in brackets:  # a shortcut: that many brackets opened in a row
            return depth + limit + 1
        inner = brackets.replace(b"[]", b"")
        if len(inner) == len(brackets):
            raise Unreadable("the body's brackets do not balance")
        brackets, depth = inner, depth + 1
    return depth


def _brackets(text: bytes) -> bytes:
    """The brackets of ``text`` outside its JSON strings, all square. With escaped backslashes
    and quotes gone, every quote left opens or closes a string."""
    unescaped = text.replace(b"\\\\", b"").replace(b'\\"', b"")
    return _STRING.sub(b"", unescaped.translate(None, _NOT_STRUCTURE)).translate(_SQUARE, b'"')


def check_tree(value: Any, what: str, *, max_bytes: int = MAX_META_BYTES) -> None:
    """Refuse a decoded value (a message's headers or properties) nested deeper than ``MAX_DEPTH``
    or larger than ``max_bytes`` (its strings' lengths, 8 for anything else); iterative."""
    size = 0
    stack: list[tuple[Any, int]] = [(value, 1)]
    while stack:
        item, depth = stack.pop()
        if isinstance(item, Mapping):
            if depth > MAX_DEPTH:
                raise Unreadable(f"its {what} nest more than {MAX_DEPTH} levels deep")
            for key, child in item.items():
                size += len(key) if isinstance(key, str) else 8
                stack.append((child, depth + 1))
        elif isinstance(item, (list, tuple)):
            if depth > MAX_DEPTH:
                raise Unreadable(f"its {what} nest more than {MAX_DEPTH} levels deep")
            stack.extend((child, depth + 1) for child in item)
        else:
            size += len(item) if isinstance(item, (str, bytes)) else 8
        if size > max_bytes:
            raise Unreadable(f"its {what} hold more than {max_bytes} bytes")


def check_payload(payload: Any) -> None:
    """Refuse a decoded body that is not a Celery task message: ``[args, kwargs, options]``
    (protocol 2), or an object with ``args`` and ``kwargs`` (protocol 1)."""
    if isinstance(payload, Mapping) and "args" in payload:
        args, kwargs, options = payload["args"], payload.get("kwargs", {}), {}
    elif isinstance(payload, list) and len(payload) == 3:
        args, kwargs, options = payload
    else:
        raise Unreadable("the body is not a task message ([args, kwargs, options])")
    if not isinstance(args, list):
        raise Unreadable(f"the task's arguments are {type(args).__name__}, not a list")
    if not isinstance(kwargs, Mapping):
        raise Unreadable(f"the task's keyword arguments are {type(kwargs).__name__}, not an object")
    if not isinstance(options, Mapping):
        raise Unreadable(f"the task's options are {type(options).__name__}, not an object")
