"""Live blocks in a report's Markdown, and the report rendered to safe HTML.

A live block is a fenced block whose info string names it (docs/reports.md)::

    ```runcast-chart keys=train/loss,val/loss from=100 to=500
    ```

Kinds: ``chart`` (``keys``, ``from``, ``to``), ``samples`` and ``evals`` (``from``, ``to``),
``checkpoint`` (``step``) and ``changes`` (``from``, ``to``). Each becomes an empty
``<div class="runcast-block">`` carrying its parameters as ``data-*`` attributes, which the report
page fills from the public API (``GET /runs/{id}/reports/{n}/data``). The rest of the Markdown is
rendered as comments are (comments.markdown: raw HTML off, nh3 allow-list, no remote image).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from typing import Any

from markdown_it import MarkdownIt
from markdown_it.common.utils import escapeHtml
from markdown_it.token import Token
from markdown_it.utils import EnvType, OptionsDict

from runcast_server.comments.markdown import parser, sanitize
from runcast_server.core.errors import ApiError

KINDS = ("chart", "samples", "evals", "checkpoint", "changes")
PARAMS = {"chart": {"keys", "from", "to"}, "samples": {"from", "to"}, "evals": {"from", "to"},
          "checkpoint": {"step"}, "changes": {"from", "to"}}
MAX_KEYS = 8
MAX_BLOCKS = 50
_KEY = re.compile(r"^[A-Za-z0-9_./\-:@]{1,200}$")
_BLOCK_ATTRIBUTES = frozenset({"class", "data-index", "data-block", "data-keys", "data-from", "data-to", "data-step"})


@dataclass(frozen=True)
class Block:
    """One live block: its ``kind``, the metric ``keys`` of a chart, and its step bounds."""

    index: int
    kind: str
    keys: tuple[str, ...] = ()
    start: int | None = None
    end: int | None = None
    step: int | None = None

    def as_dict(self) -> dict[str, Any]:
        return {"index": self.index, "kind": self.kind, "keys": list(self.keys), "from": self.start,
                "to": self.end, "step": self.step}


def _step(kind: str, name: str, text: str) -> int:
    if not text.isdigit() or len(text) > 18:
        raise ApiError(422, f"runcast-{kind}: {name}= must be a step (a whole number >= 0)", field="body")
    return int(text)


def parse_info(info: str, index: int) -> Block | None:
    """The block a fence's info string describes; None for an ordinary fence; 422 for a bad one."""
    words = info.split()
    if not words or not words[0].startswith("runcast-"):
        return None
    kind = words[0].removeprefix("runcast-")
    if kind not in KINDS:
        raise ApiError(422, f"unknown live block {words[0]!r}; one of: " + ", ".join(f"runcast-{k}" for k in KINDS),
                       field="body")
    params: dict[str, str] = {}
    for word in words[1:]:
        name, sep, value = word.partition("=")
        if not sep or name not in PARAMS[kind]:
            raise ApiError(422, f"runcast-{kind} takes {', '.join(sorted(PARAMS[kind]))} (name=value), not {word!r}",
                           field="body")
        params[name] = value
    keys = tuple(k for k in params.get("keys", "").split(",") if k)
    if kind == "chart" and not keys:
        raise ApiError(422, "runcast-chart needs keys=KEY[,KEY...]", field="body")
    if len(keys) > MAX_KEYS or not all(_KEY.match(k) for k in keys):
        raise ApiError(422, f"runcast-chart: at most {MAX_KEYS} metric names, separated by commas", field="body")
    if kind == "checkpoint" and "step" not in params:
        raise ApiError(422, "runcast-checkpoint needs step=N", field="body")
    start = _step(kind, "from", params["from"]) if "from" in params else None
    end = _step(kind, "to", params["to"]) if "to" in params else None
    if start is not None and end is not None and end < start:
        raise ApiError(422, f"runcast-{kind}: to= is below from=", field="body")
    step = _step(kind, "step", params["step"]) if "step" in params else None
    return Block(index, kind, keys, start, end, step)


def _fence(self: Any, tokens: Sequence[Token], idx: int, options: OptionsDict, env: EnvType) -> str:
    token = tokens[idx]
    block = parse_info(token.info, len(env.setdefault("blocks", [])))
    if block is None:
        return str(self.fence_default(tokens, idx, options, env))
    shown = env.get("shown")
    if shown is not None:  # a reader outside the project: withheld metric names are left out
        block = replace(block, keys=tuple(k for k in block.keys if shown(k)))
    env["blocks"].append(block)
    attrs = {"data-index": str(block.index), "data-block": block.kind, "data-keys": ",".join(block.keys),
             "data-from": "" if block.start is None else str(block.start),
             "data-to": "" if block.end is None else str(block.end),
             "data-step": "" if block.step is None else str(block.step)}
    rendered = " ".join(f'{k}="{escapeHtml(v)}"' for k, v in attrs.items())
    return f'<div class="runcast-block" {rendered}></div>\n'


def _parser() -> MarkdownIt:
    md = parser()
    md.renderer.fence_default = md.renderer.rules["fence"]  # type: ignore[attr-defined]
    md.add_render_rule("fence", _fence)
    return md


_MD = _parser()


@dataclass(frozen=True)
class Rendered:
    html: str
    blocks: list[Block]


def render(source: str, shown: Callable[[str], bool] | None = None) -> Rendered:
    """The report's sanitized HTML and its live blocks, in order (422 naming ``body`` for a bad block);
    ``shown``: which metric names the reader may see (policy.apply.View.metric; default: all)."""
    env: dict[str, Any] = {"blocks": [], "shown": shown}
    html = _MD.render(source, env)
    if len(env["blocks"]) > MAX_BLOCKS:
        raise ApiError(422, f"at most {MAX_BLOCKS} live blocks in a report", field="body")
    return Rendered(sanitize(html, {"div": _BLOCK_ATTRIBUTES}), list(env["blocks"]))
