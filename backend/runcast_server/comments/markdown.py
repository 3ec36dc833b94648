"""Markdown to safe HTML: markdown-it-py renders (raw HTML off), nh3 (ammonia) sanitizes.

Only the tags in ``TAGS`` survive; links keep ``http``, ``https`` and ``mailto`` URLs and get
``rel="nofollow ugc noopener"`` and ``target="_blank"``; images are never fetched by a reader's
browser: each becomes a link to its address (its alt text as the link's text).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import nh3
from markdown_it import MarkdownIt
from markdown_it.common.utils import escapeHtml
from markdown_it.token import Token
from markdown_it.utils import EnvType, OptionsDict

TAGS = frozenset({"p", "br", "hr", "em", "strong", "del", "s", "code", "pre", "blockquote", "ul", "ol", "li",
                  "a", "h1", "h2", "h3", "h4", "h5", "h6", "table", "thead", "tbody", "tr", "th", "td"})
ATTRIBUTES = {"a": {"href", "title"}, "ol": {"start"}, "th": {"align"}, "td": {"align"}}
URL_SCHEMES = frozenset({"http", "https", "mailto"})
LINK_REL = "nofollow ugc noopener"


def _image_as_link(self: Any, tokens: Sequence[Token], idx: int, options: OptionsDict, env: EnvType) -> str:
    token = tokens[idx]
    src = escapeHtml(str(token.attrGet("src") or ""))  # markdown-it has normalized and validated it
    alt = escapeHtml(self.renderInlineAsText(token.children or [], options, env)) or src
    return f'<a href="{src}">{alt}</a>'


def parser() -> MarkdownIt:
    """A new parser as comments (and reports: reports.blocks) are rendered with: CommonMark with tables
    and strikethrough, raw HTML off, each image a link to its address."""
    md = MarkdownIt("commonmark", {"html": False, "linkify": False}).enable(["table", "strikethrough"])
    md.add_render_rule("image", _image_as_link)
    return md


_MD = parser()


def render(source: str) -> str:
    """The sanitized HTML of Markdown ``source`` (what the page may insert as is)."""
    return sanitize(_MD.render(source))


def sanitize(html: str, extra: Mapping[str, frozenset[str]] | None = None) -> str:
    """``html`` reduced to the allow-list: no script, no event handler, no style, no image;
    ``extra``: more tags, each with the attributes it keeps (a report's block ``div``)."""
    extra = extra or {}
    return nh3.clean(html, tags=set(TAGS) | set(extra), clean_content_tags={"script", "style"},
                     attributes={**ATTRIBUTES, **{tag: set(names) for tag, names in extra.items()}},
                     url_schemes=set(URL_SCHEMES), link_rel=LINK_REL,
                     set_tag_attribute_values={"a": {"target": "_blank"}})
