"""The run beside a Runcast export: ``FILE.run.json`` next to ``FILE.jsonl`` or ``FILE.csv``.

An export's rows hold only points. ``runcast export --output FILE`` also writes what the
server says of the run (``GET /api/v1/runs/{id}``: ``RUN_FIELDS``, and each segment's
``SEGMENT_FIELDS``), and ``runcast import FILE`` reads it back, so that name, config,
summary and metric declarations, tags, group, job type, notes, seed, status, start and end
times and each segment's start step and time come back as they were. Without the file an
export is imported as before: named after the file, with the import's times.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any, Final

from runcast.importers import run_fields
from runcast.importers.model import ImportFailed, Segment, SourceRun
from runcast.importers.plan import clean_name
from runcast.wire import events

SUFFIX: Final = ".run.json"
RUN_FIELDS: Final = ("name", "status", "started_at", "finished_at", "config", "summary", "metrics", "tags", "group",
                     "job_type", "notes", "seed")
SEGMENT_FIELDS: Final = ("index", "start_step", "started_at")
_ENDED: Final = ("finished", "failed", "killed")  # running and stalled runs get no end


def path_for(export: Path) -> Path:
    """Where the run of the export file ``export`` is written: its name, extension replaced by ``.run.json``."""
    stem = export.name.rsplit(".", 1)[0] if "." in export.name else export.name
    return export.with_name(stem + SUFFIX)


def describe(detail: dict[str, Any]) -> dict[str, Any]:
    """What is written of a run detail (the server's answer to ``GET /api/v1/runs/{id}``)."""
    return {
        **{k: detail.get(k) for k in RUN_FIELDS},
        "segments": [{k: s.get(k) for k in SEGMENT_FIELDS} for s in detail.get("segments") or []],
    }


def apply(run: SourceRun, path: Path) -> None:
    """Give ``run`` (read from the export beside ``path``) the fields of the run file; ImportFailed naming the field."""
    try:
        raw = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise ImportFailed(str(path), f"not a run file ({exc})") from None
    try:
        _apply(run, raw)
    except (events.EventError, ValueError) as exc:
        raise ImportFailed(str(path), str(exc)) from None


def _apply(run: SourceRun, raw: Any) -> None:
    if not isinstance(raw, dict):
        raise ValueError("must be a JSON object")
    segments = raw.get("segments")
    if not isinstance(segments, list) or not segments or len(segments) < len(run.segments):
        raise ValueError(f"'segments' must list every segment of the export ({len(run.segments)} or more)")
    while len(run.segments) < len(segments):  # segments after the last one holding points
        run.segments.append(Segment(label=str(len(run.segments))))
    status = raw.get("status")
    if status not in (*_ENDED, "running", "stalled"):
        raise ValueError(f"'status' {status!r} is not a run status")
    finished = _time(raw.get("finished_at"), "finished_at") if status in _ENDED else None
    starts = [_segment_start(seg, index) for index, seg in enumerate(segments)]
    for index, (segment, (start_step, started)) in enumerate(zip(run.segments, starts)):
        segment.resume_step = start_step if index > 0 or start_step else None
        if started is not None:
            end = finished if index == len(starts) - 1 and finished is not None else started
            segment.span = (started, max(started, end))
    name = raw.get("name")
    if not isinstance(name, str):
        raise ValueError("'name' must be a string")
    run.name = clean_name(name, fallback=run.name)
    run.status = status if status in _ENDED else None
    run.config = events.check_json(raw.get("config") or {}, "config", events.MAX_CONFIG_BYTES)
    run.summary = run_fields.clean_summary(events.check_json(raw.get("summary") or {}, "summary", 2**31))
    run.define = events.check_define(raw["metrics"], "metrics") if raw.get("metrics") else {}
    run.tags = events.check_tags(raw.get("tags") or [])
    run.group = _text(raw.get("group"), "group", events.MAX_GROUP_CHARS)
    run.job_type = _text(raw.get("job_type"), "job_type", events.MAX_JOB_TYPE_CHARS)
    run.description = run_fields.clip_notes(_text(raw.get("notes"), "notes", None))
    seed = raw.get("seed")  # (an int of at most 64 bits, as run_started's)
    run.seed = events.check_int(seed, "seed", low=-events.MAX_INT - 1, optional=True)


def _segment_start(raw: Any, index: int) -> tuple[int, float | None]:
    where = f"segments.{index}"
    if not isinstance(raw, dict) or raw.get("index") != index:
        raise ValueError(f"'{where}' must be an object with 'index' {index}")
    step = raw.get("start_step")
    if isinstance(step, bool) or not isinstance(step, int) or not 0 <= step <= events.MAX_STEP:
        raise ValueError(f"'{where}.start_step' {step!r} is not a step in [0, {events.MAX_STEP}]")
    started = raw.get("started_at")
    return step, None if started is None else _time(started, f"{where}.started_at")


def _time(raw: Any, field: str) -> float:
    if isinstance(raw, bool) or not isinstance(raw, (int, float)) or not 0 <= raw <= events.MAX_TS or math.isnan(raw):
        raise ValueError(f"'{field}' {raw!r} is not seconds since the epoch in [0, {events.MAX_TS:.0f}]")
    return float(raw)


def _text(raw: Any, field: str, limit: int | None) -> str | None:
    if raw is None:
        return None
    if not isinstance(raw, str) or not raw.strip():
        raise ValueError(f"'{field}' must be a non-empty string or null")
    if limit is not None and len(raw) > limit:
        raise ValueError(f"'{field}' is longer than {limit} characters")
    events.check_text(raw, field)
    return raw
