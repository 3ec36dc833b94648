"""Which fenced blocks of the docs are examples, and what their markers ask.

Every block names its language. ``sh``, ``bash``, ``console`` (``$ `` before each command, the
lines after it its output), ``python`` and ``http`` (a request) are examples: each runs, unless a
marker right before it says why it cannot (``<!-- example: not run: needs docker -->``). The
other languages are not run: ``json`` and ``text`` blocks right after an example (only blank
lines between) are its documented output; ``html``, ``js``, ``markdown`` and ``yaml`` are
snippets for other programs.

Markers: ``not run: REASON``; ``exits N`` (the documented exit status, else 0);
``stopped after N s`` (a command that runs until stopped, such as a live stream: stopped after
N seconds and its output so far checked).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from docs.markdown import Block, blocks, doc_paths

EXAMPLE_LANGS = frozenset({"sh", "bash", "console", "python", "http"})
OUTPUT_LANGS = frozenset({"json", "text"})
OTHER_LANGS = frozenset({"html", "js", "markdown", "yaml"})
_MARKER = re.compile(r"not run: (?P<reason>.+)|exits (?P<status>\d+)|stopped after (?P<stop>\d+(?:\.\d+)?) s")


@dataclass(frozen=True)
class Example:
    """An example block and what its marker and the block after it say about it."""

    block: Block
    not_run: str | None  # the reason, for an example marked as not run here
    status: int  # the exit status the doc gives (0 unless marked)
    stop_after_s: float | None
    output: Block | None  # the json/text block documenting its output

    @property
    def name(self) -> str:
        return self.block.name


class MarkerError(ValueError):
    """A block without a language, with a language the docs do not use, or with a marker that means nothing."""


def examples(doc: str, text: str | None = None) -> list[Example]:
    """The examples of one doc, in order; raises MarkerError on a block the rules above do not cover."""
    found: list[Example] = []
    doc_blocks = blocks(doc, text)
    for i, block in enumerate(doc_blocks):
        if block.lang not in EXAMPLE_LANGS | OUTPUT_LANGS | OTHER_LANGS:
            raise MarkerError(
                f"{block.name}: give the block a language ({', '.join(sorted(EXAMPLE_LANGS))} or "
                f"{', '.join(sorted(OUTPUT_LANGS | OTHER_LANGS))}), not {block.lang!r}"
            )
        marker = _MARKER.fullmatch(block.marker) if block.marker else None
        if block.marker and not marker:
            raise MarkerError(f"{block.name}: unknown marker <!-- example: {block.marker} -->")
        if block.lang not in EXAMPLE_LANGS:
            if marker:
                raise MarkerError(f"{block.name}: a marker before a {block.lang} block, which is not run anyway")
            continue
        after = doc_blocks[i + 1] if i + 1 < len(doc_blocks) else None
        output = after if after and after.follows is block and after.lang in OUTPUT_LANGS else None
        found.append(Example(
            block,
            marker["reason"] if marker and marker["reason"] else None,
            int(marker["status"]) if marker and marker["status"] else 0,
            float(marker["stop"]) if marker and marker["stop"] else None,
            output,
        ))  # fmt: skip
    return found


def all_examples() -> list[Example]:
    """Every example of README.md, docs/*.md and the translated pages (docs/<language>/*.md)."""
    return [example for doc in doc_paths() for example in examples(doc)]
