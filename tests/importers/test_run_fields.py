"""The limits every format's tags, notes and summary are made to fit (runcast.importers.run_fields)."""

from __future__ import annotations

import math

from runcast.wire.events import MAX_NOTE_CHARS, MAX_TAGS
from runcast.importers.run_fields import clean_summary, clip_notes, split_tags


def test_tags_the_wire_cannot_hold_are_handed_back():
    candidates = ["ok", "ok", "a,b", "x" * 65, "tab\there", " ", *(f"t{i}" for i in range(MAX_TAGS + 3))]
    tags, rest = split_tags(candidates)
    assert tags == ["ok", *(f"t{i}" for i in range(MAX_TAGS - 1))]
    assert rest == ["a,b", "x" * 65, "tab\there", " ", *(f"t{i}" for i in range(MAX_TAGS - 1, MAX_TAGS + 3))]


def test_notes_are_clipped_and_blank_notes_are_none():
    assert clip_notes("  \n") is None and clip_notes(None) is None
    clipped = clip_notes("n" * (MAX_NOTE_CHARS + 5))
    assert clipped is not None and len(clipped) == MAX_NOTE_CHARS and clipped.endswith("…")
    assert clip_notes("a\x00b") == "a\ufffdb"


def test_a_summary_keeps_what_the_wire_holds():
    huge = "x" * 70_000
    summary = clean_summary({"loss": 0.5, "nan": math.nan, "inf": [math.inf], "bad": "\ud800", "huge": huge, "last": 1})
    assert summary == {"loss": 0.5, "nan": "NaN", "inf": ["Infinity"], "last": 1}
