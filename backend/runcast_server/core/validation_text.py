"""A request validation error's message (FastAPI's, from pydantic) in the reader's language.

pydantic words each error from a template of its ``type`` (``"String should have at most
{max_length} character{expected_plural}"``) filled from the error's ``ctx``. The catalogs key
those templates as they key every message, by the English text, so a translation fills the same
fields; the template of a type comes from ``PydanticKnownError``, pydantic's own table. A custom
error (a ``ValueError`` a validator raises) is translated by its own text. Anything the catalog
lacks stays pydantic's English, as sent.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final

from pydantic_core import PydanticKnownError

from runcast_server.core.i18n import SOURCE, messages

# Types whose ``ctx["error"]`` is a message of ours (a validator's ValueError), not a parser's.
_OWN_ERROR: Final = frozenset({"value_error", "assertion_error"})


def _template(error_type: str, ctx: Mapping[str, Any] | None) -> str | None:
    try:
        return PydanticKnownError(error_type, dict(ctx) if ctx else None).message_template  # type: ignore[arg-type]
    except (KeyError, TypeError, ValueError):
        return None  # a custom error type: no template


def validation_message(error: Mapping[str, Any], language: str) -> str:
    """``error["msg"]`` (one of ``RequestValidationError.errors()``) in ``language``."""
    english = str(error.get("msg", "invalid request"))
    if language == SOURCE:
        return english
    t = messages(language)
    ctx = dict(error.get("ctx") or {})
    template = _template(str(error.get("type", "")), ctx)
    if template is None:
        return t(english)
    translated = t.catalog.gettext(template)
    if translated == template:
        return english
    if error.get("type") in _OWN_ERROR and "error" in ctx:
        ctx["error"] = t(str(ctx["error"]))
    try:
        return translated.format(**ctx)
    except (KeyError, IndexError, ValueError):  # a catalog entry naming a field this error lacks
        return english
