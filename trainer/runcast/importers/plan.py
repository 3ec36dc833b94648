"""From a source run to Runcast wire events, with every id and number derived from the source.

Importing the same source twice must change nothing, so nothing here is random:

* the run id is a hash of the project, the format and the source run's identity
  (22 URL-safe characters), a segment id a hash of the run id and the segment's index;
* ``seq`` per segment: ``run_started`` 0, metrics events 1, 2, ... in step order, samples
  and media from ``OUTPUT_SEQ`` in step order, notes from ``NOTE_SEQ``, the run's summary and metric
  declarations (an ``update`` on the last segment) at ``UPDATE_SEQ`` plus a hash of them, ``finished`` at
  ``FINISHED_SEQ`` minus the status's place in
  ``FINAL_STATUSES``: a source that grew since the last import keeps the numbers of its
  outputs (new ones come at later steps), notes and end, and a run that ended differently since (a crashed run that was
  resumed) adds its new end, which is later and so decides the status.

The server stores a timeline event, a sample or a media event once per (segment, seq) and a
point once per (series, step), so a second import stores nothing new. An image's bytes go to
the blob route before its event (``send``), once the run is stored.

Times: every event carries the source's wall time (``ts``): ``run_started`` of a
segment the time of its first point (the run's start), ``finished`` of its last, a
metrics event the earliest time any value of its step was recorded, a sample or media event
its own time (else its step's, else the segment's start). The server keeps
run and segment times from them, and each step's time from its metrics event's ``ts`` (the
series ``_timestamp``, as for a live run): the time axes, exports and ``history()`` read it.
A source without times gets the import's time.
"""

from __future__ import annotations

import base64
import hashlib
import heapq
import json
import math
import re
from collections.abc import Iterator
from dataclasses import dataclass
from itertools import repeat
from typing import Any, Final

from runcast.importers.model import Blob, ImportFailed, Segment, SourceRun
from runcast.wire import events

OUTPUT_SEQ: Final = 2**51
NOTE_SEQ: Final = 2**52
# An update's seq is this plus a hash of its body: the same summary is stored once, a changed one
# (a source that grew) is a new update, later in time, so it wins.
UPDATE_SEQ: Final = 2**52 + 2**50
FINISHED_SEQ: Final = events.MAX_SEQ
# Segments must reach the server in order of their start time (it numbers them so):
# a segment that starts no later than the previous one ended is moved this much after.
_SEGMENT_GAP_S: Final = 0.001
_CONTROL: Final = re.compile(r"[\x00-\x1f\x7f-\x9f]+")


@dataclass(frozen=True)
class Target:
    """Where and how runs are imported: the project (the token's), visibility, detectors on or off."""

    project: str
    visibility: str = "public"
    alerts: bool = True


def run_id(project: str, run: SourceRun) -> str:
    """The Runcast run id of ``run`` imported into ``project``: the same on every import."""
    digest = hashlib.sha256(f"{project}\0{run.format}\0{run.identity}".encode()).digest()
    return base64.urlsafe_b64encode(digest[:16]).decode().rstrip("=")


def segment_id(run: str, index: int) -> str:
    digest = hashlib.sha256(f"{run}\0{index}".encode()).digest()
    return base64.urlsafe_b64encode(digest[:12]).decode()


def clean_name(name: str, fallback: str) -> str:
    """A run name the server accepts: control characters folded to spaces, at most 200 characters."""
    text = _CONTROL.sub(" ", name).strip()[: events.MAX_NAME_CHARS].strip()
    return text or fallback


@dataclass
class Plan:
    """One source run as Runcast events: ``started`` (validated) first, then ``body()``."""

    run: SourceRun
    run_id: str
    name: str
    started: list[dict[str, Any]]
    starts: list[float]
    ends: list[float]

    @property
    def blobs(self) -> dict[str, Blob]:
        """The images to upload, by SHA-256."""
        return {o.blob.sha256: o.blob for seg in self.run.segments for o in seg.outputs if o.blob is not None}

    def points(self) -> int:
        """The points the import stores: the source's (the steps' times are the server's own series)."""
        return self.run.points

    def point_keys(self) -> Iterator[tuple[str, int]]:
        """(metric, step) of every point the import stores (``points()`` of them)."""
        for segment in self.run.segments:
            for key, series in segment.series.items():
                yield from zip(repeat(key), series.steps)

    def body(self) -> Iterator[tuple[dict[str, Any], int]]:
        """Metrics, samples and media, notes and finished events after ``started``, each with the count of
        points it stores."""
        run = self.run
        last = len(run.segments) - 1
        for index, segment in enumerate(run.segments):
            sid = self.started[index]["segment"]
            notes = sorted(
                (n for n in run.notes if n.segment == index), key=lambda n: (n.step is not None, n.step or 0)
            )
            times: dict[int, float] = {}
            seq = 0
            for step, values, t in merged_steps(segment):
                ts = t if not math.isnan(t) else self.starts[index]
                if notes:
                    times[step] = ts
                points = len(values)
                items = [(k, events.encode_value(v)) for k, v in values.items()]
                for start in range(0, len(items), events.MAX_METRICS_PER_EVENT):
                    seq += 1
                    chunk = dict(items[start : start + events.MAX_METRICS_PER_EVENT])
                    yield _envelope("metrics", self.run_id, sid, seq, ts, step=step, values=chunk), points
                    points = 0
            steps = {step: t for step, _, t in merged_steps(segment)} if segment.outputs else {}
            in_order = sorted(segment.outputs, key=lambda o: o.body["step"])
            for n, output in enumerate(in_order):
                t = output.ts if not math.isnan(output.ts) else steps.get(output.body["step"], math.nan)
                ts = t if not math.isnan(t) else self.starts[index]
                yield _envelope(output.type, self.run_id, sid, OUTPUT_SEQ + n, ts, **output.body), 0
            for n, note in enumerate(notes):
                ts = times.get(note.step, self.starts[index]) if note.step is not None else self.starts[index]
                yield _envelope("note", self.run_id, sid, NOTE_SEQ + n, ts, step=note.step, text=note.text), 0
            if index == last and (run.summary or run.define):
                yield self._update(sid, self.ends[index]), 0
            status = "killed" if index < last else run.status
            if status is not None:
                seq = FINISHED_SEQ - events.FINAL_STATUSES.index(status)
                yield _envelope(
                    "finished", self.run_id, sid, seq, self.ends[index], step=segment.last_step(), status=status
                ), 0


    def _update(self, segment: str, ts: float) -> dict[str, Any]:
        body: dict[str, Any] = {}
        if self.run.summary:
            body["summary"] = self.run.summary
        if self.run.define:
            body["define"] = self.run.define
        digest = hashlib.sha256(json.dumps(body, sort_keys=True).encode()).digest()
        return _envelope("update", self.run_id, segment, UPDATE_SEQ + int.from_bytes(digest[:4], "big"), ts, **body)


def plan_run(run: SourceRun, target: Target, *, name: str, now: float) -> Plan:
    """Ids, times and the validated ``run_started`` events of ``run``; raises ImportFailed."""
    rid = run_id(target.project, run)
    ranges = [segment.time_range() for segment in run.segments]
    known = [r for r in ranges if r is not None]
    t0 = min(r[0] for r in known) if known else None
    starts: list[float] = []
    ends: list[float] = []
    for r in ranges:
        start = r[0] if r is not None else (ends[-1] if ends else (t0 if t0 is not None else now))
        if ends:
            start = max(start, ends[-1] + _SEGMENT_GAP_S)
        starts.append(start)
        ends.append(max(r[1], start) if r is not None else start)
    started = []
    previous_last: int | None = None
    for index, segment in enumerate(run.segments):
        first = segment.first_step()
        resume = segment.resume_step
        if index > 0 and resume is None:
            resume = max(0, first - 1) if first is not None else (previous_last or 0)
        previous_last = segment.last_step() if segment.last_step() is not None else previous_last
        event = _envelope(
            "run_started",
            rid,
            segment_id(rid, index),
            0,
            starts[index],
            project=target.project,
            name=name,
            config=run.config,
            code={},
            env=run.env,
            seed=run.seed,
            resume_step=resume,
            visibility=target.visibility,
            **_run_fields(run),
        )
        if not target.alerts:
            event["alerts"] = {"enabled": False}
        try:
            events.validate_event(event)
        except events.EventError as exc:
            raise ImportFailed(f"{run.format} run {name!r}", str(exc)) from None
        started.append(event)
    plan = Plan(run=run, run_id=rid, name=name, started=started, starts=starts, ends=ends)
    if run.summary or run.define:
        try:
            events.validate_event(plan._update(started[-1]["segment"], ends[-1]))
        except events.EventError as exc:
            raise ImportFailed(f"{run.format} run {name!r}", str(exc)) from None
    return plan


def _run_fields(run: SourceRun) -> dict[str, Any]:
    fields: dict[str, Any] = {"tags": run.tags} if run.tags else {}
    for name, value in (("group", run.group), ("job_type", run.job_type), ("notes", run.description)):
        if value is not None:
            fields[name] = value
    return fields


def merged_steps(segment: Segment) -> Iterator[tuple[int, dict[str, float], float]]:
    """(step, {key: value}, earliest known time or NaN) for every step of the segment, in order."""
    series = segment.series
    if len(series) == 1:
        ((key, only),) = series.items()
        for step, value, t in zip(only.steps, only.values, only.times):
            yield step, {key: value}, t
        return
    merged = heapq.merge(*(zip(s.steps, repeat(key), s.values, s.times) for key, s in sorted(series.items())))
    current: int | None = None
    values: dict[str, float] = {}
    earliest = math.nan
    for step, key, value, t in merged:
        if step != current:
            if values and current is not None:  # (values are gathered only once current is a step)
                yield current, values, earliest
            current, values, earliest = step, {}, t
        values[key] = value
        if t < earliest or math.isnan(earliest):
            earliest = t
    if values and current is not None:
        yield current, values, earliest


def _envelope(kind: str, run: str, segment: str, seq: int, ts: float, /, **body: Any) -> dict[str, Any]:
    return {"v": events.SCHEMA_VERSION, "type": kind, "run": run, "segment": segment, "seq": seq, "ts": ts, **body}
