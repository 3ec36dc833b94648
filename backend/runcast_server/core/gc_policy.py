"""The cyclic garbage collector's policy for a long-lived server process.

A serving process holds a large, stable heap (modules, the app, its routes and models) and
makes short-lived objects at a high rate (one wake-up and one write per live viewer per
message; rows and dicts per ingested point). With CPython's defaults (a young collection
every 700 net allocations) the collector runs thousands of times a second under load, and
every older-generation pass walks that whole stable heap again.

``tune_for_serving`` moves what exists once the app is built into the permanent generation
(``gc.freeze``: never walked again) and collects the young generation less often. Reference
counting still frees almost everything at once; only garbage in cycles waits a little longer.
"""

from __future__ import annotations

import gc

YOUNG_THRESHOLD = 50_000  # net allocations between young collections (CPython's default: 700)


def tune_for_serving() -> None:
    """Freeze the heap built so far and space the young collections out (call once, after start-up)."""
    gc.collect()
    gc.freeze()
    _, older, oldest = gc.get_threshold()
    gc.set_threshold(YOUNG_THRESHOLD, older, oldest)
