"""One anonymous viewer's first load of a run page in headless Chromium (a fresh context: an empty
browser cache), as nginx's cache answered it: every request's URL, ``X-Cache-Status`` and bytes
on the wire. Shared by tests/browser/test_crowd_first_load.py and bench/crowd_first_load.py."""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any

# Bytes on the wire (headers + encoded body) of the document and of every resource fetched so far,
# per URL in the order fetched (a URL read twice has two sizes: a 304's is its headers).
_SIZES = """() => {
  const nav = performance.getEntriesByType('navigation')[0];
  const out = {[nav.name]: [nav.transferSize || 0]};
  for (const r of performance.getEntriesByType('resource')) (out[r.name] = out[r.name] || []).push(r.transferSize || 0);
  return out;
}"""


@dataclass(frozen=True)
class Fetched:
    """One request of the load: ``cache`` is nginx's X-Cache-Status (None: not a cached location),
    ``at`` when its response came (``time.time()``)."""

    url: str
    status: int
    cache: str | None
    bytes: int
    at: float


def _next_size(sizes: dict[str, list[int]], url: str) -> int:
    """The size of ``url``'s next fetch in the order the page made them (0 once none is left)."""
    left = sizes.get(url)
    return int(left.pop(0)) if left else 0


def first_load(browser: Any, url: str, timeout_ms: int = 30000) -> list[Fetched]:
    """Open ``url`` (a run page) in a fresh context until the curve is drawn, the page follows the
    run (its first edge read, in follow mode ``cache``) and the network has been idle for 500 ms
    (the panels' reads done); the requests made until then."""
    context = browser.new_context(viewport={"width": 1280, "height": 900}, locale="en-US")
    try:
        page = context.new_page()
        seen: list[tuple[Any, float]] = []
        page.on("response", lambda r: seen.append((r, time.time())))
        page.goto(url)
        page.wait_for_function("window.__runcastDrawn !== undefined", timeout=timeout_ms)
        page.wait_for_function("window.__runcast.stream && window.__runcast.stream.open", timeout=timeout_ms)
        page.wait_for_load_state("networkidle", timeout=timeout_ms)  # the panels' reads too
        sizes = page.evaluate(_SIZES)
        return [Fetched(r.url, r.status, r.headers.get("x-cache-status"), _next_size(sizes, r.url), at)
                for r, at in sorted(seen, key=lambda s: s[1]) if r.url.startswith("http")]
    finally:
        context.close()
