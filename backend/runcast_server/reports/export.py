"""A published report as one static HTML file that opens offline: the report's sanitized HTML,
its blocks' data inline (as the public reads it), Plotly.js and the page's block renderer inline.
The file asks no server for anything; its Content-Security-Policy forbids it to. It is in English
(the words of its blocks are the English catalog's ``reportBlock.*`` messages), whatever the
language of the page it was downloaded from."""

from __future__ import annotations

import html
import json
from typing import Any

# Nothing may be fetched; the inline scripts are this file's own; images only as data: URLs.
CSP = "default-src 'none'; script-src 'unsafe-inline'; style-src 'unsafe-inline'; img-src data:"

STYLE = """body{font:16px/1.5 system-ui,sans-serif;max-width:60rem;margin:2rem auto;padding:0 1rem;color:#222}
.runcast-block{margin:1rem 0}.runcast-chart{height:320px}table{border-collapse:collapse}
td,th{border:1px solid #ccc;padding:.2rem .5rem;text-align:left;vertical-align:top}
.runcast-meta{color:#666;font-size:.9rem}"""


LANGUAGE = "en"  # the export's language: its <html lang> and the catalog its blocks' words come from
BLOCK_MESSAGES = "reportBlock."


def block_messages(catalog: bytes) -> dict[str, str]:
    """The renderer's own words (``reportBlock.*``) from a catalog file (frontend/i18n/<code>.json)."""
    return {k: v for k, v in json.loads(catalog).items() if k.startswith(BLOCK_MESSAGES)}


def _script_json(value: Any) -> str:
    """JSON safe inside a <script> element (no closing tag, no comment opener)."""
    return json.dumps(value, allow_nan=False).replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026")


def _inline(source: bytes) -> str:
    # A bundle's text cannot close its script element early ("</script" escaped as JS allows).
    return source.decode("utf-8").replace("</script", "<\\/script")


def static_html(*, title: str, meta: str, body_html: str, blocks: list[dict[str, Any]], plotly: bytes,
                renderer: bytes, messages: dict[str, str]) -> bytes:
    """The file's bytes. ``body_html`` is already sanitized (reports.blocks.render)."""
    page = f"""<!doctype html>
<html lang="{LANGUAGE}"><head><meta charset="utf-8">
<meta http-equiv="Content-Security-Policy" content="{CSP}">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>{html.escape(title)}</title><style>{STYLE}</style></head>
<body><article id="report"><h1>{html.escape(title)}</h1><p class="runcast-meta">{html.escape(meta)}</p>
{body_html}</article>
<script id="runcast-report-data" type="application/json">{_script_json(blocks)}</script>
<script id="runcast-report-messages" type="application/json">{_script_json(messages)}</script>
<script>{_inline(plotly)}</script>
<script>{_inline(renderer)}</script>
<script>runcastFillBlocks(document.getElementById("report"),
  JSON.parse(document.getElementById("runcast-report-data").textContent), window.Plotly,
  runcastMessages(JSON.parse(document.getElementById("runcast-report-messages").textContent)));</script>
</body></html>
"""
    return page.encode("utf-8")
