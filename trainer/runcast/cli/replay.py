"""``runcast replay FILE``: stream a recorded training log into Runcast as if it were live.

The log is read as ``runcast import`` reads it (``runcast.importers.training_log``:
JSONL or CSV, names mapped to Runcast's conventions, ``segment`` and ``run`` columns).
A new ``segment`` value is a resume: a new ``init(resume=RUN_ID, resume_step=...)``, the
previous segment ends as "killed"; a new ``run`` value is a new run. A segment's resume
step is its first step minus one (the checkpoint the job restarted from). Rows whose
step does not increase within a segment are skipped and counted (a metric is written
once per step).

Events: a ``FILE.events.json`` beside the log (or ``--events``) with ``events[]`` of
``run``, ``segment``, ``step``, ``type``, ``quote``, ``source``, ``note`` becomes notes on
the timeline, sent when the replay reaches their step. A ``FILE.samples.jsonl`` beside the
log (``runcast.importers.training_samples``) is sent with ``run.log_samples`` the same way: a
sample when the replay reaches its step in its segment (one without a ``segment``: in the
segment the replay is in then), what is left of a segment when it ends.

Timing: ``--speed X`` plays X times faster than recorded; recorded time comes from the
``timestamp`` field, else ``--seconds-per-step`` per step. ``--speed 0`` sends as fast as
possible. Gaps are capped at ``--max-gap`` seconds of wall time.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Annotated, Any

import typer

from runcast.cli.exits import EXIT_REFUSED
from runcast.cli.progress import Bars, wanted
from runcast.handshake import InitError
from runcast.importers.model import ImportFailed
from runcast.importers.training_log import (
    load_events,
    metrics_of,
    note_text,
    number,
    read_rows,
    timestamp,
)
from runcast.importers.training_samples import SampleRow, load_samples, samples_path_of


def replay(
    path: Path,
    init: Callable[..., Any],
    *,
    project: str | None = None,
    name: str | None = None,
    speed: float = 0.0,
    seconds_per_step: float = 1.0,
    max_gap: float = 10.0,
    events_path: Path | None = None,
    sleep: Callable[[float], None] = time.sleep,
    log: Callable[[str], None] = print,
    on_progress: Callable[[int, int], None] | None = None,
) -> dict[str, Any]:
    """Replay ``path`` through runs made by ``init(project=, name=, config=, resume=, resume_step=)``.

    Returns counts: rows sent, rows skipped, runs, segments, notes, samples. ``on_progress(done, total)``
    is called every 1000 rows and at the end.
    """
    if events_path is None:
        events_path = path.with_name(path.name.rsplit(".", 1)[0] + ".events.json")
    r = _Replay(path=path, init=init, project=project, base_name=name or path.name.rsplit(".", 1)[0], log=log,
                events=load_events(events_path), samples=load_samples(samples_path_of(path)),
                rows=[row for _, row in read_rows(path)])
    for done, row in enumerate(r.rows):
        if on_progress is not None and done % 1000 == 0:
            on_progress(done, len(r.rows))
        step_value = number(row.get("step"))
        if step_value is None:
            r.counts["skipped"] += 1
            continue
        step = int(step_value)
        run_value, segment = str(row.get("run") or ""), str(row.get("segment") or "")
        if (run_value, segment) != r.key:
            r.end_segment(run_value)
            r.start_segment(run_value, segment, step)
        if step <= r.last_step:
            r.counts["skipped"] += 1
            continue
        r.pace(row, step, speed, seconds_per_step, max_gap, sleep)
        r.send_row(row, step)
    r.end_segment(None)
    if on_progress is not None:
        on_progress(len(r.rows), len(r.rows))
    return r.counts


@dataclass
class _Replay:
    """One replay: the log's rows, events and samples, the run being sent and what has been sent."""

    path: Path
    init: Callable[..., Any]
    project: str | None
    base_name: str
    log: Callable[[str], None]
    events: list[dict[str, Any]]
    samples: list[SampleRow]
    rows: list[dict[str, Any]]
    current: Any = None
    key: tuple[str, str] | None = None  # (run column value, segment) of the rows being sent
    pending: list[dict[str, Any]] = field(default_factory=list)  # the events of the key, sent as steps pass
    last_step: int = -1
    last_time: float | None = None
    run_ids: dict[str, str] = field(default_factory=dict)  # run column value -> Runcast run id
    sent_samples: set[int] = field(default_factory=set)
    counts: dict[str, int] = field(default_factory=lambda: dict.fromkeys(
        ("rows", "skipped", "runs", "segments", "notes", "samples"), 0))

    def __post_init__(self) -> None:
        self.has_run_column = any("run" in row for row in self.rows[:1])
        self.present = {(str(r.get("run") or ""), str(r.get("segment") or "")) for r in self.rows}

    def events_for(self, run_value: str, segment: str) -> list[dict[str, Any]]:
        mine = [e for e in self.events
                if e.get("segment") == segment and (not self.has_run_column or e.get("run") == run_value)]
        return sorted(mine, key=lambda e: (e.get("step") is not None, e.get("step") or 0))

    def orphans(self, run_value: str) -> list[dict[str, Any]]:
        """Events of this run whose segment has no rows in the log: sent when the run's rows end."""
        mine = [
            e for e in self.events
            if (str(e.get("run") or "") if self.has_run_column else "", str(e.get("segment") or "")) not in self.present
            and (not self.has_run_column or e.get("run") == run_value)
        ]
        return sorted(mine, key=lambda e: (e.get("step") is not None, e.get("step") or 0))

    def send_notes(self, upto: float) -> None:
        while self.pending and (self.pending[0].get("step") is None or self.pending[0]["step"] <= upto):
            event = self.pending.pop(0)
            self.current.note(note_text(event), step=event.get("step"))
            self.counts["notes"] += 1

    def send_samples(self, upto: float, explicit_only: bool = False) -> None:
        """Samples of the current run and segment up to step ``upto`` (``explicit_only``: those naming it)."""
        assert self.key is not None
        due = [x for x in self.samples
               if x.line not in self.sent_samples and x.step <= upto and _belongs(x, self.key, self.has_run_column)
               and (x.segment is not None or not explicit_only)]
        for sample in sorted(due, key=lambda x: (x.step, x.line)):
            self.current.log_samples([sample.row], step=sample.step, key=sample.key)
            self.sent_samples.add(sample.line)
            self.counts["samples"] += 1

    def end_segment(self, next_run: str | None) -> None:
        """What is left of the segment sent, and its run finished: "killed" when the same run goes on in a
        new segment (a resume), "finished" when another run follows or the log ends (``next_run`` None)."""
        if self.current is None or self.key is None:  # (key is set with current)
            return
        same_run = self.key[0] == next_run
        if not same_run:
            self.pending.extend(self.orphans(self.key[0]))
        self.send_notes(math.inf)
        self.send_samples(math.inf, explicit_only=same_run)
        self.current.finish("killed" if same_run else "finished")

    def start_segment(self, run_value: str, segment: str, step: int) -> None:
        """A new run for a new run value, else a resume of its run from the step before ``step``."""
        resume = self.run_ids.get(run_value)
        label = self.base_name if not run_value else f"{self.base_name}:{run_value}"
        config = {"replayed_from": self.path.name, "run": run_value or None, "segment": segment or None}
        if resume is None:
            self.current = self.init(project=self.project, name=label[:200], config=config)
            self.run_ids[run_value] = self.current.id
            self.counts["runs"] += 1
            self.log(f"replaying {label} as run {self.current.id}")
        else:
            self.current = self.init(project=self.project, name=label[:200], config=config, resume=resume,
                                     resume_step=max(0, step - 1))
            self.log(f"segment {segment!r}: resume at step {max(0, step - 1)}")
        self.counts["segments"] += 1
        self.key, self.last_step, self.pending = (run_value, segment), -1, self.events_for(run_value, segment)

    def pace(self, row: dict[str, Any], step: int, speed: float, seconds_per_step: float, max_gap: float,
             sleep: Callable[[float], None]) -> None:
        """Wait the recorded time between rows, divided by the speed-up (capped at ``max_gap``)."""
        now = timestamp(row.get("timestamp"))
        if speed > 0:
            if now is None:
                now = (self.last_time or 0.0) + (seconds_per_step * (step - self.last_step) if self.last_step >= 0
                                                 else 0.0)
            if self.last_time is not None:
                sleep(min(max_gap, max(0.0, now - self.last_time) / speed))
        self.last_time = now

    def send_row(self, row: dict[str, Any], step: int) -> None:
        """The notes and samples due by ``step``, then the row's metrics."""
        self.send_notes(step)
        self.send_samples(step)
        values = metrics_of(row)
        if values:
            self.current.log(values, step=step)
            self.counts["rows"] += 1
        else:
            self.counts["skipped"] += 1
        self.last_step = step
        if values and self.counts["rows"] % 10_000 == 0:
            self.current.flush(60)  # keep the SDK queue short at --speed 0


def _belongs(sample: SampleRow, key: tuple[str, str], has_run_column: bool) -> bool:
    """Whether a sample is of the run and segment ``key`` (a sample without a segment: of any)."""
    run_value, segment = key
    return (not has_run_column or sample.run == run_value) and sample.segment in (None, segment)


def replay_command(
    file: Annotated[Path, typer.Argument(exists=True, dir_okay=False, help="A .jsonl or .csv training log.")],
    speed: Annotated[float, typer.Option(min=0.0, help="Times faster than recorded; 0 = as fast as possible.")] = 1.0,
    seconds_per_step: Annotated[
        float, typer.Option(min=0.0, help="Recorded time per step when the log has no timestamps.")
    ] = 1.0,
    max_gap: Annotated[float, typer.Option(min=0.0, help="Longest wait between two rows, in seconds.")] = 10.0,
    events: Annotated[
        Path | None, typer.Option(help="Events JSON to show as notes (default: FILE's .events.json).")
    ] = None,
    project: Annotated[str | None, typer.Option(
        envvar="RUNCAST_PROJECT", help="Project the replayed runs belong to (default: the token's).")] = None,
    name: Annotated[
        str | None, typer.Option(help="Run name (default: the file name; ':<run>' per run column value).")
    ] = None,
    server: Annotated[str | None, typer.Option(envvar="RUNCAST_SERVER", help="Runcast server URL.")] = None,
    token: Annotated[
        str | None, typer.Option(envvar="RUNCAST_TOKEN", help="Project ingest token.", show_default=False)
    ] = None,
    quiet: Annotated[bool, typer.Option("--quiet", "-q", help="No progress bar.")] = False,
) -> None:
    """Stream a recorded training log (JSONL or CSV) into Runcast as if it were live, segments and events included."""
    _send(file, speed, seconds_per_step, max_gap, events, project, name, server, token, quiet)


def _send(
    file: Path,
    speed: float,
    seconds_per_step: float,
    max_gap: float,
    events: Path | None,
    project: str | None,
    name: str | None,
    server: str | None,
    token: str | None,
    quiet: bool,
) -> None:
    if not server:
        raise typer.BadParameter("needs a server: --server or RUNCAST_SERVER", param_hint="--server")
    import runcast

    def init(**kwargs: Any) -> Any:
        return runcast.init(server=server, token=token, capture_code=False, **kwargs)

    try:
        with Bars(wanted(quiet)) as bars:
            bar = bars.task("replay", total=None, unit="rows")
            counts = replay(file, init, project=project, name=name, speed=speed, seconds_per_step=seconds_per_step,
                            max_gap=max_gap, events_path=events, log=typer.echo,
                            on_progress=lambda done, total: bars.update(bar, done, total))
    except InitError as exc:  # the server refused the token or the project: not a bad argument
        typer.echo(f"runcast replay: {exc}", err=True)
        raise typer.Exit(EXIT_REFUSED) from None
    except (ValueError, ImportFailed) as exc:
        raise typer.BadParameter(str(exc)) from exc
    typer.echo(
        f"replayed {counts['rows']} rows ({counts['skipped']} skipped) as {counts['runs']} run(s), "
        f"{counts['segments']} segment(s), {counts['notes']} note(s)"
        + (f", {counts['samples']} sample(s)" if counts["samples"] else "")
    )
