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
    events = load_events(events_path)
    samples = load_samples(samples_path_of(path))
    sent_samples: set[int] = set()
    base_name = name or path.name.rsplit(".", 1)[0]
    run_ids: dict[str, str] = {}  # run column value -> Runcast run id
    current: Any = None
    key: tuple[str, str] | None = None
    pending: list[dict[str, Any]] = []
    last_step = -1
    last_time: float | None = None
    counts = {"rows": 0, "skipped": 0, "runs": 0, "segments": 0, "notes": 0, "samples": 0}

    def events_for(run_value: str, segment: str) -> list[dict[str, Any]]:
        mine = [e for e in events if e.get("segment") == segment and (not has_run_column or e.get("run") == run_value)]
        return sorted(mine, key=lambda e: (e.get("step") is not None, e.get("step") or 0))

    rows = [row for _, row in read_rows(path)]
    has_run_column = any("run" in row for row in rows[:1])
    present = {(str(r.get("run") or ""), str(r.get("segment") or "")) for r in rows}

    def orphans(run_value: str) -> list[dict[str, Any]]:
        """Events of this run whose segment has no rows in the log: sent when the run's rows end."""
        mine = [
            e for e in events
            if (str(e.get("run") or "") if has_run_column else "", str(e.get("segment") or "")) not in present
            and (not has_run_column or e.get("run") == run_value)
        ]
        return sorted(mine, key=lambda e: (e.get("step") is not None, e.get("step") or 0))

    def send_notes(upto: float) -> None:
        while pending and (pending[0].get("step") is None or pending[0]["step"] <= upto):
            event = pending.pop(0)
            current.note(note_text(event), step=event.get("step"))
            counts["notes"] += 1

    def send_samples(upto: float, explicit_only: bool = False) -> None:
        """Samples of the current run and segment up to step ``upto`` (``explicit_only``: those naming it)."""
        assert key is not None
        due = [x for x in samples if x.line not in sent_samples and x.step <= upto and _belongs(x, key, has_run_column)
               and (x.segment is not None or not explicit_only)]
        for sample in sorted(due, key=lambda x: (x.step, x.line)):
            current.log_samples([sample.row], step=sample.step, key=sample.key)
            sent_samples.add(sample.line)
            counts["samples"] += 1

    for done, row in enumerate(rows):
        if on_progress is not None and done % 1000 == 0:
            on_progress(done, len(rows))
        step_value = number(row.get("step"))
        if step_value is None:
            counts["skipped"] += 1
            continue
        step = int(step_value)
        run_value = str(row.get("run") or "")
        segment = str(row.get("segment") or "")
        if (run_value, segment) != key:
            if current is not None and key is not None:  # (key is set with current)
                same_run = key[0] == run_value
                if not same_run:
                    pending.extend(orphans(key[0]))
                send_notes(math.inf)
                send_samples(math.inf, explicit_only=same_run)
                current.finish("killed" if same_run else "finished")
            resume = run_ids.get(run_value)
            label = base_name if not run_value else f"{base_name}:{run_value}"
            config = {"replayed_from": path.name, "run": run_value or None, "segment": segment or None}
            if resume is None:
                current = init(project=project, name=label[:200], config=config)
                run_ids[run_value] = current.id
                counts["runs"] += 1
                log(f"replaying {label} as run {current.id}")
            else:
                current = init(project=project, name=label[:200], config=config, resume=resume,
                               resume_step=max(0, step - 1))
                log(f"segment {segment!r}: resume at step {max(0, step - 1)}")
            counts["segments"] += 1
            key, last_step, pending = (run_value, segment), -1, events_for(run_value, segment)
        if step <= last_step:
            counts["skipped"] += 1
            continue
        # pacing: recorded time between rows, divided by the speed-up
        now = timestamp(row.get("timestamp"))
        if speed > 0:
            if now is None:
                now = (last_time or 0.0) + (seconds_per_step * (step - last_step) if last_step >= 0 else 0.0)
            if last_time is not None:
                sleep(min(max_gap, max(0.0, now - last_time) / speed))
        last_time = now
        send_notes(step)
        send_samples(step)
        values = metrics_of(row)
        if values:
            current.log(values, step=step)
            counts["rows"] += 1
        else:
            counts["skipped"] += 1
        last_step = step
        if values and counts["rows"] % 10_000 == 0:
            current.flush(60)  # keep the SDK queue short at --speed 0
    if current is not None and key is not None:
        pending.extend(orphans(key[0]))
        send_notes(math.inf)
        send_samples(math.inf)
        current.finish("finished")
    if on_progress is not None:
        on_progress(len(rows), len(rows))
    return counts


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
