"""Where a page's script is when it answers nothing: its main thread paused through the Chrome
DevTools protocol, the call stack mapped to the frontend's sources by the bundles' source maps.

The debugger must be enabled while the page still answers (``watch``, right after the page is
made): on a page already spinning, ``Debugger.enable`` waits for the main thread, but a pause
asked of an enabled debugger interrupts the running script.
"""

from __future__ import annotations

import bisect
import time
from functools import cache
from typing import Any

import httpx

B64 = {c: i for i, c in enumerate("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/")}


def watch(page: Any) -> None:
    """Enable the page's debugger now, so that ``stack`` can pause it later."""
    session = page.context.new_cdp_session(page)
    page.paused_frames = []
    page.script_urls = {}  # scriptId -> URL (a paused frame names its script by id)
    session.on("Debugger.scriptParsed", lambda event: page.script_urls.__setitem__(event["scriptId"], event["url"]))
    session.on("Debugger.paused", lambda event: page.paused_frames.extend(event["callFrames"]))
    session.send("Debugger.enable")
    page.debugger = session


def stack(page: Any, seconds: float = 10) -> str:
    """The page's call stack, innermost first, as ``function (source:line:column)``; or why none."""
    session = getattr(page, "debugger", None)
    if session is None:
        return "(no debugger: the page was not watched)"
    session.send("Debugger.pause")
    deadline = time.monotonic() + seconds
    while not page.paused_frames and time.monotonic() < deadline:
        page.wait_for_timeout(100)
    if not page.paused_frames:
        return f"(not paused in {seconds} s: the main thread is not running a script)"
    return "; ".join(_frame(f, page.script_urls) for f in page.paused_frames[:20])


def _frame(frame: dict[str, Any], urls: dict[str, str]) -> str:
    where = frame["location"]
    url, line, column = urls.get(where["scriptId"], ""), where["lineNumber"], where.get("columnNumber", 0)
    name = frame.get("functionName") or "(anonymous)"
    try:
        source = _source_map(url + ".map").at(line, column) if url.endswith(".js") else None
    except (httpx.HTTPError, ValueError, KeyError):
        source = None
    if source is not None:
        return f"{name} ({source})"
    return f"{name} ({url.rsplit('/', 1)[-1]}:{line + 1}:{column + 1})"


class SourceMap:
    """A version-3 source map's mappings, for looking a generated position up."""

    def __init__(self, body: dict[str, Any]) -> None:
        self.sources: list[str] = body["sources"]
        self.lines: list[list[tuple[int, int, int, int]]] = []  # (column, source, source line, source column)
        source = line = column_in_source = 0  # carried across lines, as the format says
        for text in body["mappings"].split(";"):
            column, segments = 0, []
            for segment in filter(None, text.split(",")):
                fields = _vlq(segment)
                column += fields[0]
                if len(fields) >= 4:  # a fifth field (a name) is not needed here
                    source, line, column_in_source = source + fields[1], line + fields[2], column_in_source + fields[3]
                    segments.append((column, source, line, column_in_source))
            self.lines.append(segments)

    def at(self, line: int, column: int) -> str | None:
        """``source:line:column`` (1-based) of the generated 0-based position, if mapped."""
        segments = self.lines[line] if line < len(self.lines) else []
        i = bisect.bisect_right([s[0] for s in segments], column) - 1
        if i < 0:
            return None
        _, source, source_line, source_column = segments[i]
        return f"{self.sources[source]}:{source_line + 1}:{source_column + 1}"


def _vlq(segment: str) -> list[int]:
    values, shift, value = [], 0, 0
    for char in segment:
        digit = B64[char]
        value += (digit & 31) << shift
        if digit & 32:
            shift += 5
            continue
        values.append(-(value >> 1) if value & 1 else value >> 1)
        shift = value = 0
    return values


@cache
def _source_map(url: str) -> SourceMap:
    return SourceMap(httpx.get(url, timeout=10).raise_for_status().json())
