"""The fenced code blocks of the docs (README.md, docs/*.md), with the marker written before each.

A marker is an HTML comment on the last non-blank line before a fence, invisible once
rendered but plain in the source: ``<!-- example: not run: needs docker -->``,
``<!-- example: exits 1 -->``, ``<!-- example: stopped after 3 s -->`` (tests/docs/blocks.py).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
_FENCE = re.compile(r"^(?P<indent> *)(?P<fence>`{3,})(?P<info>[^`]*)$")
_MARKER = re.compile(r"^\s*<!-- example: (?P<text>.*?) -->\s*$")


@dataclass(frozen=True)
class Block:
    """One fenced block: where it is, its language (the info string's first word), its text."""

    doc: str  # relative to the checkout: "docs/api.md"
    line: int  # of the opening fence, 1-based
    lang: str
    text: str
    marker: str | None  # the text of an <!-- example: ... --> comment right before it
    follows: Block | None  # the block just before, when only blank lines separate them

    @property
    def name(self) -> str:
        return f"{self.doc}:{self.line}"


def doc_paths() -> list[str]:
    """README.md, every docs/*.md and every translated page (docs/<language>/*.md, e.g.
    docs/zh-CN/README.md), relative to the checkout."""
    pages = [*(ROOT / "docs").glob("*.md"), *(ROOT / "docs").glob("*/*.md")]
    return ["README.md", *sorted(str(p.relative_to(ROOT)) for p in pages)]


def blocks(doc: str, text: str | None = None) -> list[Block]:
    """The fenced blocks of ``doc`` (read from the checkout unless ``text`` is given), in order."""
    lines = (text if text is not None else (ROOT / doc).read_text()).split("\n")
    found: list[Block] = []
    last_end = -2  # index of the closing fence of the previous block
    i = 0
    while i < len(lines):
        m = _FENCE.match(lines[i])
        if not m:
            i += 1
            continue
        indent, fence = len(m["indent"]), m["fence"]
        close = re.compile(rf"^ *{fence}\s*$")
        j = i + 1
        while j < len(lines) and not close.match(lines[j]):
            j += 1
        body = "\n".join(line[indent:] if line[:indent].isspace() else line for line in lines[i + 1 : j])
        before = [line for line in lines[max(last_end + 1, 0) : i] if line.strip()]
        marker = _MARKER.match(before[-1]) if before else None
        follows = found[-1] if found and not before else None
        found.append(
            Block(doc, i + 1, (m["info"].split() or [""])[0], body + "\n", marker["text"] if marker else None, follows)
        )
        last_end = j
        i = j + 1
    return found
