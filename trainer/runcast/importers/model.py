"""What every importer produces: source runs made of segments of metric series and outputs.

A reader turns one source (a file, a directory, a tracking server) into ``SourceRun``
objects, entirely in memory, before anything is sent: a source that fails to parse
sends nothing. Points are kept in typed arrays (24 bytes a point), so a run of 10^6
points costs tens of megabytes, not hundreds.

``RunBuilder`` applies the one mapping rule every format shares: points arrive in the
order they were recorded; a step lower than the previous step of the same metric
opens a new segment (the job restarted from an earlier checkpoint, as Runcast's own
resumes do), and a step equal to it is a repeat: the first value is kept (a metric
is written once per step) and the repeat is counted. Samples and media (``Output``) belong to the segment current when they are read.
"""

from __future__ import annotations

import math
from array import array
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Final

from runcast.wire.events import MAX_STEP, MAX_TS, TIMESTAMP_KEY, check_key

# A restart opens a segment; a source whose steps go back more often than this is not
# a run that restarted but data in another order (pass --format or fix the source).
MAX_SEGMENTS: Final = 1000


class ImportFailed(Exception):
    """A source that cannot be imported. ``where`` names the file and line, record or run."""

    def __init__(self, where: str, message: str) -> None:
        super().__init__(f"{where}: {message}")
        self.where = where
        self.message = message


class MissingExtra(ImportFailed):
    """A format's reader needs a package that is not installed."""

    def __init__(self, where: str, package: str, extra: str) -> None:
        super().__init__(
            where, f"reading this needs the {package!r} package: pip install 'runcast[{extra}]'"
        )
        self.package = package
        self.extra = extra


@dataclass
class Series:
    """One metric of one segment, in step order: steps, values, wall times (NaN: unknown)."""

    steps: array[int] = field(default_factory=lambda: array("q"))
    values: array[float] = field(default_factory=lambda: array("d"))
    times: array[float] = field(default_factory=lambda: array("d"))


@dataclass(frozen=True)
class Blob:
    """An image's bytes to upload before its event: their SHA-256 and type, and how to read them again."""

    sha256: str
    content_type: str
    load: Callable[[], bytes]


@dataclass(frozen=True)
class Output:
    """A ``sample`` or ``media`` event of a segment: its checked body (``step`` included), its wall
    time (NaN: unknown) and, for an image, the blob the server must hold first."""

    type: str
    body: dict[str, Any]
    ts: float = math.nan
    blob: Blob | None = None


@dataclass
class Segment:
    """One stretch of a run between restarts. ``label`` is the source's name for it, if any."""

    label: str | None = None
    series: dict[str, Series] = field(default_factory=dict)
    outputs: list[Output] = field(default_factory=list)
    resume_step: int | None = None  # the source's own start step (a Runcast export's); else derived from the points
    span: tuple[float, float] | None = None  # the source's own start and end times; else those of the points

    @property
    def points(self) -> int:
        return sum(len(s.steps) for s in self.series.values())

    def first_step(self) -> int | None:
        firsts = [s.steps[0] for s in self.series.values() if s.steps]
        return min(firsts) if firsts else None

    def last_step(self) -> int | None:
        lasts = [s.steps[-1] for s in self.series.values() if s.steps]
        return max(lasts) if lasts else None

    def time_range(self) -> tuple[float, float] | None:
        """The earliest and latest known wall time of the segment's points and outputs (or its ``span``)."""
        if self.span is not None:
            return self.span
        low, high = math.inf, -math.inf
        for times in [*(s.times for s in self.series.values()), [o.ts for o in self.outputs]]:
            known = [t for t in times if not math.isnan(t)]
            if known:
                low, high = min(low, min(known)), max(high, max(known))
        return (low, high) if low <= high else None


@dataclass
class Note:
    """A timeline note of a segment (index into ``SourceRun.segments``)."""

    segment: int
    step: int | None
    text: str


@dataclass
class SourceRun:
    """One run of the source, ready to be planned into Runcast events.

    ``identity`` is stable across imports of the same source (the Runcast run id is
    derived from it and the project); ``status`` is finished, failed or killed, or None
    for a run the source says is still running (no ``finished`` event is sent).
    ``tags``, ``group``, ``job_type``, ``description`` (the run's notes) and ``seed`` go into
    ``run_started``; ``summary`` and ``define`` (metric declarations) into an ``update``
    (``run_fields`` makes them fit).
    """

    format: str
    identity: str
    name: str
    segments: list[Segment]
    config: dict[str, Any] = field(default_factory=dict)
    env: dict[str, Any] = field(default_factory=dict)
    status: str | None = "finished"
    notes: list[Note] = field(default_factory=list)
    repeats: int = 0
    tags: list[str] = field(default_factory=list)
    group: str | None = None
    job_type: str | None = None
    description: str | None = None
    seed: int | None = None
    summary: dict[str, Any] = field(default_factory=dict)
    define: dict[str, dict[str, str]] = field(default_factory=dict)

    @property
    def points(self) -> int:
        return sum(seg.points for seg in self.segments)

    @property
    def outputs(self) -> int:
        return sum(len(seg.outputs) for seg in self.segments)


class RunBuilder:
    """Collects one source run's points in recorded order (see the module docstring)."""

    def __init__(self) -> None:
        self.segments: list[Segment] = [Segment()]
        self.repeats = 0
        self._good_keys: set[str] = set()

    @property
    def current(self) -> Segment:
        return self.segments[-1]

    def new_segment(self, label: str | None = None) -> None:
        """Start a segment now (an explicit restart); an empty current segment is reused."""
        if self.current.series or self.current.outputs:
            self._open(label)
        else:
            self.current.label = label

    def add(self, key: str, step: int, value: float, ts: float = math.nan) -> None:
        """Add one point; raises ValueError naming what is wrong with it."""
        series = self.current.series.get(key)
        if series is None:
            if key not in self._good_keys:
                check_key(key, "metric")
                if key == TIMESTAMP_KEY:  # the server's own series: a source's times go in ``ts``
                    raise ValueError(f"{key!r} is the time of a step (ts), not a metric")
                self._good_keys.add(key)
            if type(step) is not int or not 0 <= step <= MAX_STEP:
                raise ValueError(f"step {step!r} of {key!r} is not an integer in [0, {MAX_STEP}]")
            series = self.current.series[key] = Series()
        elif type(step) is not int or not 0 <= step <= MAX_STEP:
            raise ValueError(f"step {step!r} of {key!r} is not an integer in [0, {MAX_STEP}]")
        if not (0.0 <= ts <= MAX_TS or math.isnan(ts)):
            raise ValueError(f"time {ts!r} of {key!r} is not seconds since the epoch in [0, {MAX_TS:.0f}]")
        if series.steps:
            last = series.steps[-1]
            if step == last:
                self.repeats += 1
                return
            if step < last:
                self._open(self.current.label)
                series = self.current.series[key] = Series()
        series.steps.append(step)
        series.values.append(value)
        series.times.append(ts)

    def add_output(self, output: Output) -> None:
        """Add a sample or media event (checked by ``source_outputs``) to the current segment."""
        self.current.outputs.append(output)

    def _open(self, label: str | None) -> None:
        if len(self.segments) >= MAX_SEGMENTS:
            raise ValueError(
                f"steps go back more than {MAX_SEGMENTS} times: this is not a run that restarted"
            )
        self.segments.append(Segment(label=label))

    def build(self, **fields: Any) -> SourceRun:
        """The finished run (``fields``: SourceRun's fields but ``segments`` and ``repeats``)."""
        return SourceRun(segments=self.segments, repeats=self.repeats, **fields)

