"""Text for people in the reader's language: message catalogs, and the choice of language.

English is the source: every message's id is its English text (``str.format`` fields in
braces), so English needs no catalog and a client that asks for nothing gets the text it
always got. Every other language is one gettext catalog, ``core/locales/<tag>.po`` (its
``Plural-Forms`` header carries the language's plural rule): adding a language is adding a
file. The catalogs are read with Babel once, when this module is imported, into a read-only
mapping: data shipped with the code, like a table of constants, not state a process changes.
"""

from __future__ import annotations

import gettext
import io
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from types import MappingProxyType
from typing import Any, Final

from babel.messages.mofile import write_mo
from babel.messages.pofile import read_po

SOURCE: Final = "en"
LOCALES: Final = Path(__file__).with_name("locales")


@dataclass(frozen=True)
class Messages:
    """One language's messages: ``t("Run stalled")``, ``t("{n} alert", "{n} alerts", n=3)``."""

    language: str
    catalog: gettext.NullTranslations

    def __call__(self, msgid: str, plural: str | None = None, /, *, context: str | None = None, **fields: Any) -> str:
        """``msgid`` translated (``plural`` with the count in ``n``; ``context`` tells apart
        one English text in two roles), its fields filled in."""
        if plural is None:
            text = self.catalog.pgettext(context, msgid) if context else self.catalog.gettext(msgid)
        elif context:
            text = self.catalog.npgettext(context, msgid, plural, int(fields["n"]))
        else:
            text = self.catalog.ngettext(msgid, plural, int(fields["n"]))
        return text.format(**fields) if fields else text


def _read(language: str) -> Messages:
    with (LOCALES / f"{language}.po").open("rb") as f:
        catalog = read_po(f, locale=language.replace("-", "_"))
    compiled = io.BytesIO()
    write_mo(compiled, catalog)
    compiled.seek(0)
    return Messages(language, gettext.GNUTranslations(compiled))


_ENGLISH: Final = Messages(SOURCE, gettext.NullTranslations())
# Every served language's messages, English first; read once at import (see the module's docstring).
_CATALOGS: Final[Mapping[str, Messages]] = MappingProxyType(
    {SOURCE: _ENGLISH, **{p.stem: _read(p.stem) for p in sorted(LOCALES.glob("*.po"))}})


def languages() -> tuple[str, ...]:
    """The languages served: English and one per catalog file (BCP 47 tags, e.g. ``zh-CN``)."""
    return tuple(_CATALOGS)


def messages(language: str = SOURCE) -> Messages:
    """The messages of ``language`` (English for one not served)."""
    return _CATALOGS.get(language, _ENGLISH)


def negotiate(accept_language: str | None, asked: str | None = None) -> str:
    """The language to answer in: ``asked`` (``?lang=``) when served, else the best of an
    ``Accept-Language`` header (by q-value; ``zh-TW`` or ``zh`` take ``zh-CN`` when that is the
    only Chinese served), else English."""
    served = {lang.lower(): lang for lang in languages()}
    wanted = [asked] if asked else []
    ranked: list[tuple[float, int, str]] = []
    for i, part in enumerate((accept_language or "").split(",")):
        tag, _, params = part.strip().partition(";")
        q = 1.0
        for param in params.split(";"):
            name, _, value = param.strip().partition("=")
            if name.strip() == "q":
                try:
                    q = float(value)
                except ValueError:
                    q = 0.0
        if tag.strip() and q > 0:
            ranked.append((-q, i, tag.strip()))
    wanted += [tag for _, _, tag in sorted(ranked)]
    for tag in wanted:
        low = tag.lower().replace("_", "-")
        if low == "*":
            return SOURCE
        if low in served:
            return served[low]
        primary = low.split("-")[0]
        for key, lang in served.items():
            if key.split("-")[0] == primary:
                return lang
    return SOURCE
