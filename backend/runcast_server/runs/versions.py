"""Run versions and their replay log (``run_versions``), written in one place.

A run's ``version`` moves by one per committed change of it: a stored batch (ingest), an
alert opened or closed (the alerts engine, the stall sweep), a command's event on the record
(commands.record). ``RunChange`` is what one such change did to one run; ``write_version_log`` records it, one row per version (the
live stream's replay). The run domain owns both, so every writer goes through here.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any, Protocol

from sqlalchemy import Connection, Table

from runcast_server.core.db import upsert
from runcast_server.record.models import RunVersion

RUN_VERSIONS: Table = RunVersion.__table__


@dataclass
class RunChange:
    """What one batch did to one run."""

    run: str
    version: int
    changed: bool = False
    status: str = "running"
    last_step: int | None = None
    keys: set[str] = field(default_factory=set)
    points: int = 0
    events: list[str] = field(default_factory=list)
    # For the run_versions log (live-stream replay): [series_id, first_step, last_step, count]
    # of the points this batch inserted, and the ids of the timeline events it inserted.
    ranges: list[list[int]] = field(default_factory=list)
    event_ids: list[int] = field(default_factory=list)
    # The ids of the samples, evals and media rows it inserted, by table (outputs.store).
    outputs: dict[str, list[int]] = field(default_factory=dict)
    described: bool = False  # an update changed the run's name, tags, group or notes

    def message(self) -> dict[str, Any]:
        """The live message for this change (channel ``run:<id>``)."""
        return {
            "run": self.run,
            "version": self.version,
            "status": self.status,
            "last_step": self.last_step,
            "keys": sorted(self.keys),
            "points": self.points,
            "events": self.events,
            "described": self.described,
        }


class Changes(Protocol):
    """Anything holding per-run changes (``ingest.results.IngestResult``)."""

    runs: dict[str, RunChange]


def write_version_log(conn: Connection, result: Changes) -> None:
    """One ``run_versions`` row per run whose version this batch bumped (the stream's replay log).

    ``committed_at`` is when the batch is stored (now), not when it arrived (a batch may
    wait in the inbox): the broadcast delay (policy/delay.py) counts from it."""
    now = time.time()
    rows = [
        {
            "run_id": rid,
            "version": ch.version,
            "status": ch.status,
            "last_step": ch.last_step,
            "committed_at": now,
            "points": ch.points,
            "ranges": ch.ranges,
            "event_ids": sorted(ch.event_ids),
            "outputs": {table: sorted(ids) for table, ids in sorted(ch.outputs.items())} or None,
            "described": ch.described,
        }
        for rid, ch in sorted(result.runs.items())
        if ch.changed
    ]
    if rows:
        conn.execute(upsert(conn, RUN_VERSIONS).on_conflict_do_nothing(index_elements=["run_id", "version"]), rows)
