"""The rules of the docs' examples hold (tests/docs/blocks.py), quickly and without a server: every
fenced block names its language, every marker means something, every per-page setting of
tests/docs/pages.py names an example that exists, and docs/testing.md gives the true counts."""

from __future__ import annotations

import re

import pytest

from docs.blocks import MarkerError, all_examples, examples
from docs.markdown import ROOT
from docs.pages import PAGES


def test_every_block_is_an_example_an_output_or_a_snippet() -> None:
    found = all_examples()  # raises MarkerError naming a block without a language or with a bad marker
    assert found and all(e.not_run is None or e.not_run.strip() for e in found)


def test_a_block_without_a_language_or_with_an_unknown_marker_is_refused() -> None:
    with pytest.raises(MarkerError, match="README.md:1: give the block a language"):
        examples("README.md", "```\nruncast serve\n```\n")
    with pytest.raises(MarkerError, match="unknown marker"):
        examples("README.md", "<!-- example: skip -->\n```sh\nruncast serve\n```\n")


def test_each_page_setting_names_an_example_of_its_page() -> None:
    for doc, page in PAGES.items():
        run_here = [e.block.text for e in examples(doc) if e.not_run is None]
        for key in [*page.preludes, *page.output_files]:
            assert sum(key in text for text in run_here) == 1, f"{doc}: {key!r} should name exactly one example"
        for key in page.substitutions:
            assert any(key in text for text in run_here), f"{doc}: no example has {key!r} to substitute"


def test_docs_testing_md_gives_the_counts() -> None:
    found = all_examples()
    marked = sum(1 for e in found if e.not_run)
    text = (ROOT / "docs" / "testing.md").read_text()
    m = re.search(r"(\d+) examples[^.]*?: (\d+) run[^.]*?, (\d+) marked", text)
    assert m, "docs/testing.md should say 'N examples ...: R run ..., M marked'"
    assert (int(m[1]), int(m[2]), int(m[3])) == (len(found), len(found) - marked, marked)
