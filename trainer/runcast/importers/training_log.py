"""Training logs: JSON Lines (the seed format) or CSV, one row per step. Shared with ``runcast replay``.

* JSONL, one object per line: ``step``, ``loss``, ``learning_rate``, ``grad_norm``,
  ``tokens_seen``, ``timestamp`` (epoch seconds or ISO 8601); other numeric fields are
  metrics under their own names.
* CSV with a header: ``step`` plus numeric columns. Empty cells and non-numeric
  columns are skipped.

Both may have a ``segment`` column (a new value is a resume: a new segment of the same
run) and a ``run`` column (a new value is another run). Names are mapped to Runcast's
conventions (``COLUMN_NAMES``: ``loss`` -> ``train/loss``, ``val_loss`` -> ``val/loss``,
``learning_rate`` -> ``lr``, ``tokens`` / ``consumed_tokens`` -> ``tokens_seen``).
``FILE.events.json`` beside the log (``events[]`` of ``run``, ``segment``, ``step``,
``type``, ``quote``, ``source``, ``note``) becomes notes on the timeline, and
``FILE.samples.jsonl`` the run's samples (``training_samples``).
"""

from __future__ import annotations

import csv
import hashlib
import json
from collections.abc import Iterator
from datetime import datetime
from pathlib import Path
from typing import Any, Final

from runcast.importers.model import ImportFailed, Note, RunBuilder, SourceRun
from runcast.importers.training_samples import SampleRow, load_samples, samples_path_of

NAME: Final = "log"
COLUMN_NAMES: Final = {
    "loss": "train/loss",
    "lm_loss": "train/loss",
    "val_loss": "val/loss",
    "learning_rate": "lr",
    "lr": "lr",
    "grad_norm": "grad_norm",
    "tokens": "tokens_seen",
    "consumed_tokens": "tokens_seen",
    "tokens_seen": "tokens_seen",
}
NOT_METRICS: Final = frozenset({"step", "segment", "run", "timestamp", "time", "ts"})


def read_rows(path: Path) -> Iterator[tuple[int, dict[str, Any]]]:
    """(line number, row) in file order, from JSONL or CSV (by extension; .csv is CSV)."""
    try:
        if path.suffix.lower() == ".csv":
            with open(path, newline="", encoding="utf-8") as f:
                reader = csv.DictReader(f)
                for row in reader:
                    yield reader.line_num, row
            return
        with open(path, encoding="utf-8") as f:
            for number, line in enumerate(f, 1):
                if not line.strip():
                    continue
                try:
                    row = json.loads(line)
                except json.JSONDecodeError as exc:
                    raise ImportFailed(f"{path}:{number}", f"not JSON ({exc.msg})") from None
                if not isinstance(row, dict):
                    raise ImportFailed(f"{path}:{number}", "not a JSON object")
                yield number, row
    except UnicodeDecodeError as exc:
        raise ImportFailed(str(path), f"not UTF-8 text (byte {exc.start}): is it a log of another format?") from None


def number(raw: Any) -> float | None:
    """The float a cell stands for ("nan", "inf" and "1.5E+00" included), or None."""
    if raw is None or isinstance(raw, bool):
        return None
    if isinstance(raw, (int, float)):
        return float(raw)
    if isinstance(raw, str) and raw.strip():
        try:
            return float(raw)
        except ValueError:
            return None
    return None


def timestamp(raw: Any) -> float | None:
    """Epoch seconds from a number or an ISO 8601 string; None when absent or unreadable."""
    value = number(raw)
    if value is not None:
        return value
    if isinstance(raw, str) and raw.strip():
        try:
            return datetime.fromisoformat(raw.strip()).timestamp()
        except ValueError:
            return None
    return None


def metrics_of(row: dict[str, Any]) -> dict[str, float]:
    """The row's numeric fields under Runcast's names."""
    out: dict[str, float] = {}
    for key, raw in row.items():
        if key is None or key in NOT_METRICS:
            continue
        value = number(raw)
        if value is not None:
            out[COLUMN_NAMES.get(key, key)] = value
    return out


def load_events(path: Path | None) -> list[dict[str, Any]]:
    """The ``events[]`` of an events JSON file, or [] when there is none."""
    if path is None or not path.exists():
        return []
    try:
        found = json.loads(path.read_text(encoding="utf-8")).get("events", [])
    except (ValueError, AttributeError) as exc:
        raise ImportFailed(str(path), f"not an events JSON object ({exc})") from None
    if not isinstance(found, list) or not all(isinstance(e, dict) for e in found):
        raise ImportFailed(str(path), "'events' must be a list of objects")
    return found


def events_path_of(path: Path) -> Path:
    """``FILE.events.json`` beside ``FILE.jsonl`` / ``FILE.csv``."""
    return path.with_name(path.name.rsplit(".", 1)[0] + ".events.json")


def note_text(event: dict[str, Any]) -> str:
    text = f"[{event.get('type', 'event')}] {event.get('quote', '')}".strip()
    if event.get("segment"):
        text += f" (segment {event['segment']})"
    if event.get("source"):
        text += f" (source: {event['source']})"
    if event.get("note"):
        text += f" Note: {event['note']}"
    return text[:10_000]


def read(path: Path, events_path: Path | None = None) -> list[SourceRun]:
    """One SourceRun per ``run`` value (one for a log without that column)."""
    builders: dict[str, RunBuilder] = {}
    labels: dict[str, str] = {}
    first_line = ""
    for line, row in read_rows(path):
        where = f"{path}:{line}"
        if not first_line:
            first_line = json.dumps(row, sort_keys=True, default=str)
        raw_step = number(row.get("step"))
        if raw_step is None or not raw_step.is_integer():
            raise ImportFailed(where, f"'step' must be a whole number, got {row.get('step')!r}")
        step = int(raw_step)
        ts = timestamp(row.get("timestamp"))
        if ts is None and row.get("timestamp") not in (None, ""):
            raise ImportFailed(where, f"'timestamp' {row['timestamp']!r} is neither epoch seconds nor ISO 8601")
        run_value = str(row.get("run") or "")
        segment = str(row.get("segment") or "")
        builder = builders.get(run_value)
        if builder is None:
            builder = builders[run_value] = RunBuilder()
            builder.new_segment(segment or None)
        elif labels[run_value] != segment:
            builder.new_segment(segment or None)
        labels[run_value] = segment
        try:
            for key, value in metrics_of(row).items():
                builder.add(key, step, value, ts if ts is not None else float("nan"))
        except ValueError as exc:
            raise ImportFailed(where, str(exc)) from None
    identity = f"{path.name}\0{hashlib.sha256(first_line.encode()).hexdigest()}"
    documented = load_events(events_path if events_path is not None else events_path_of(path))
    for sample in load_samples(samples_path_of(path)):
        _place(sample, builders, samples_path_of(path))
    stem = path.name.rsplit(".", 1)[0]
    runs = []
    for run_value, builder in builders.items():
        notes = _notes(documented, builder, run_value, has_run_column=len(builders) > 1 or bool(run_value))
        runs.append(
            builder.build(
                format=NAME,
                identity=f"{identity}\0{run_value}",
                name=f"{stem}:{run_value}" if run_value else stem,
                env={"imported_from": {"format": NAME, "file": path.name, "run": run_value or None}},
                notes=notes,
            )
        )
    return runs


def _notes(documented: list[dict[str, Any]], builder: RunBuilder, run_value: str, *, has_run_column: bool) -> list[Note]:
    """Documented events of this run as notes: on the (last) segment of their label, else the last segment."""
    by_label = {seg.label: i for i, seg in enumerate(builder.segments) if seg.label}
    notes = []
    for event in documented:
        if has_run_column and str(event.get("run") or "") != run_value:
            continue
        index = by_label.get(str(event.get("segment") or ""), len(builder.segments) - 1)
        step = event.get("step")
        notes.append(Note(segment=index, step=step if isinstance(step, int) and step >= 0 else None, text=note_text(event)))
    return notes


def _place(sample: SampleRow, builders: dict[str, RunBuilder], path: Path) -> None:
    """Add a sample to its run (its ``run``, or the log's only one) and segment (its label's last, else
    the last that starts at or before its step, else the first)."""
    where = f"{path}:{sample.line}"
    if sample.run is None and len(builders) > 1:
        raise ImportFailed(where, "the log holds several runs: say which with 'run'")
    builder = builders.get(sample.run if sample.run is not None else next(iter(builders), ""))
    if builder is None:
        raise ImportFailed(where, f"no run {sample.run!r} in the log")
    segments = builder.segments
    labelled = [i for i, seg in enumerate(segments) if sample.segment is not None and seg.label == sample.segment]
    if sample.segment is not None and not labelled:
        raise ImportFailed(where, f"no segment {sample.segment!r} in the log")
    started = [i for i, seg in enumerate(segments) if (seg.first_step() or 0) <= sample.step]
    index = labelled[-1] if labelled else (started[-1] if started else 0)
    segments[index].outputs.append(sample.output())
