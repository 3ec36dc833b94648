"""What the server already holds of a planned run, so an import reports what it stores this time.

The ingest answers 202 before it stores, and stores a point once per (series, step): what
an import adds is the points of its plan the run does not hold yet. They are counted before
sending, from the run's export (``GET /api/v1/runs/{id}/export?format=csv``): every
(metric, step) of the plan beyond the rows of that metric and step the server has. A run the
server does not know (404) holds nothing. Samples and media are not counted (the reads give no
total): for a run the server knows, the import says how many it sent.
"""

from __future__ import annotations

import csv
from collections import Counter
from typing import Final

import httpx

from runcast.importers.plan import Plan

_TIMEOUT: Final = httpx.Timeout(60.0)
_FORMULA_START: Final = ("=", "+", "-", "@", "\t", "\r")  # the CSV export's guard, as runcast_export undoes it


class StoredUnknown(Exception):
    """The server did not say what it holds of a run (not 200 or 404)."""


def already_stored(client: httpx.Client, server: str, plan: Plan) -> int | None:
    """How many of ``plan``'s points the server holds now; None for a run it does not know."""
    held: Counter[tuple[str, int]] = Counter()
    url = f"{server.rstrip('/')}/api/v1/runs/{plan.run_id}/export"
    with client.stream("GET", url, params={"format": "csv"}, timeout=_TIMEOUT) as response:
        if response.status_code == 404:
            return None
        if response.status_code != 200:
            raise StoredUnknown(f"{url} answered {response.status_code}")
        rows = csv.reader(response.iter_lines())  # (a metric name holds no line break)
        next(rows, None)
        for row in rows:
            if len(row) >= 4:  # segment, key, step, value (, time)
                key = row[1][1:] if row[1][:1] == "'" and row[1][1:2] and row[1][1] in _FORMULA_START else row[1]
                held[(key, int(row[2]))] += 1
    if not held:
        return 0
    wanted = Counter(plan.point_keys())
    return sum(min(count, held[point]) for point, count in wanted.items())

