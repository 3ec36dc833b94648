"""What a batch did (``IngestResult``, one ``runs.versions.RunChange`` per run) and why one is refused."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from runcast_server.runs.versions import RunChange


@dataclass
class IngestResult:
    """The outcome of ``store_batch``: per-run changes and what was really written."""

    runs: dict[str, RunChange] = field(default_factory=dict)
    points_received: int = 0
    points_inserted: int = 0
    events_inserted: int = 0
    outputs_inserted: int = 0  # samples, evals and media rows (outputs.store)
    # Alerts this batch opened or closed: {"id", "run", "phase", "kind"} (alerts.engine).
    alerts: list[dict[str, Any]] = field(default_factory=list)
    # (run, segment uid) -> segment id of every segment of the batch's runs (for the detectors).
    segments: dict[tuple[str, str], int] = field(default_factory=dict)

    def messages(self) -> list[tuple[str, dict[str, Any]]]:
        """``(run_id, message)`` for every run the batch changed, to publish after commit."""
        return [(rid, ch.message()) for rid, ch in sorted(self.runs.items()) if ch.changed]


class IngestRejected(Exception):
    """A batch that can never be stored as sent: ``status`` is the HTTP status to answer."""

    status = 400

    def __init__(self, message: str, *, field: str, index: int) -> None:
        super().__init__(message)
        self.message = message
        self.field = field
        self.index = index


class UnknownRun(IngestRejected):
    """An event for a run (or segment) with no run_started stored or in the batch."""

    status = 404


class UnknownBlob(IngestRejected):
    """An image event whose blob the run's project does not hold (the SDK uploads it first);
    another project's blob answers the same."""

    status = 404


class ForeignRun(IngestRejected):
    """An event for a run of another project: answered exactly as an unknown run (404), so
    that another project's run ids cannot be probed."""

    status = 404


class TakenRun(ForeignRun):
    """A run_started for an id another project's run holds (ids are random: a clash is a bug
    or a probe; the id cannot be used, so this one answer differs from an unknown id's)."""

    status = 409


class WrongProject(ForeignRun):
    """A run_started naming a project other than the token's."""

    status = 403
