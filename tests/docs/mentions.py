"""What the docs name: ``runcast`` command lines and their flags, ``RUNCAST_*`` settings, HTTP routes.

Commands are read from code only (fenced blocks and inline code spans), where a reader copies
them from; settings and routes from the whole text.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from docs.markdown import blocks

_SPAN = re.compile(r"(`+)(?!`)(.+?)(?<!`)\1(?!`)", re.S)
_COMMAND = re.compile(r"(?<![\w.\-])runcast[ \t]+")
_STOP = {"|", "||", "&&", ";", "&", ">", ">>", "2>", "2>&1", "<", "\\"}
_WORD = re.compile(r"[a-z][a-z0-9-]*")
_FLAG = re.compile(r"--?[A-Za-z][A-Za-z0-9-]*")
_SETTING = re.compile(r"\b(RUNCAST_[A-Z0-9_]*[A-Z0-9])(_\*)?")
METHODS = ("GET", "HEAD", "POST", "PUT", "PATCH", "DELETE")
_ROUTE = re.compile(
    r"\b(?P<methods>(?:GET|HEAD|POST|PUT|PATCH|DELETE)(?:`?\s*(?:/|\||,|or|and)\s*`?(?:GET|HEAD|POST|PUT|PATCH|DELETE))*)"
    r"`?(?: of)?\s+`?(?P<path>/[^\s`'\"),;]*)"
)
_API_PATH = re.compile(r"(?<![\w.])(?P<path>/api/v1/[^\s`'\"),;<>]*)")


@dataclass(frozen=True)
class Command:
    """``runcast WORDS... FLAGS...`` as a doc writes it."""

    words: tuple[str, ...]  # the verb and subcommand words, e.g. ("runs", "list"); unknown ones included
    flags: tuple[str, ...]
    text: str


def code_texts(doc: str, text: str) -> list[str]:
    """The code of a doc: each fenced block, and each inline code span of the prose around them."""
    return [b.text for b in blocks(doc, text)] + prose_spans(text)


def prose_spans(text: str) -> list[str]:
    """The inline code spans outside fenced blocks."""
    prose = re.sub(r"^ *(`{3,})[^\n]*\n.*?^ *\1 *$", "", text, flags=re.S | re.M)
    return [m[2] for m in _SPAN.finditer(prose)]


def commands(code: str) -> list[Command]:
    """Every ``runcast ...`` command line in ``code``, cut at a pipe, redirection, comment or the next ``runcast``."""
    found = []
    for m in _COMMAND.finditer(code):
        tokens: list[str] = []
        for token in code[m.end() :].split("\n")[0].split():
            if token in _STOP or token.startswith("#") or token == "runcast":
                break
            tokens.append(token)
            if token.endswith((")", ",")):
                break
        words: list[str] = []
        for token in tokens:
            word = token.rstrip(":,.`);")
            if not all(_WORD.fullmatch(w) for w in word.split("|")):
                break
            words.append(word)
        if not words and not (tokens and tokens[0].startswith("-")):
            continue  # `runcast` as another program's argument (an image name, a database role)
        flags = [
            f.split("=")[0] for t in tokens for f in re.split(r"[|\[\](),]", t) if _FLAG.fullmatch(f.split("=")[0])
        ]
        found.append(Command(tuple(words), tuple(flags), m[0] + " ".join(tokens)))
    return found


def settings(text: str) -> set[str]:
    """The ``RUNCAST_*`` names in ``text``; ``RUNCAST_STREAM_*`` as the prefix ``RUNCAST_STREAM_``."""
    return {m[1] + ("_" if m[2] else "") for m in _SETTING.finditer(text)}


def routes(text: str) -> set[tuple[str, str]]:
    """(method, path) for each ``METHOD /path`` (``GET``/``HEAD /path`` gives both); method ``*``
    for a bare ``/api/v1/...`` path. Paths as written: a query, a fragment and a trailing ``…`` cut."""
    found = set()
    for m in _ROUTE.finditer(text):
        for method in re.findall("|".join(METHODS), m["methods"]):
            found |= {(method, path) for path in _paths(m["path"])}
    for m in _API_PATH.finditer(text):
        found |= {("*", path) for path in _paths(m["path"])}
    return {(method, path) for method, path in found if path}


def _paths(written: str) -> list[str]:
    """A path as written, without its query, fragment or ``[...]``; ``plot.svg|png`` is two paths."""
    path = re.split(r"[?#\[]", written)[0].rstrip(".:")
    head, _, alternatives = path.partition("|")
    if not alternatives:
        return [path]
    stem = head.rsplit(".", 1)[0]
    return [head, *(f"{stem}.{alt}" for alt in alternatives.split("|"))]
