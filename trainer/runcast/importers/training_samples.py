"""Samples of a training log: ``FILE.samples.jsonl`` beside ``FILE.jsonl`` / ``FILE.csv`` (docs/import.md).

One JSON object per line: ``step`` (required), ``prompt`` and ``output`` (text), and as
``run.log_samples`` takes them ``prompt_id``, ``reference``, ``scores`` and ``settings``;
``key`` (default ``samples``); ``run`` and ``segment`` name the log's run and segment (as
its columns do; without them, the segment the step falls in). ``runcast import`` stores
them with the log's points, ``runcast replay`` sends them when it reaches their step.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

from runcast.importers.model import ImportFailed, Output
from runcast.outputs import prompt_id
from runcast.wire.checks import EventError
from runcast.wire.model_outputs import sample_body

SAMPLE_FIELDS: Final = frozenset({"prompt", "output", "prompt_id", "reference", "scores", "settings"})
PLACE_FIELDS: Final = frozenset({"step", "key", "run", "segment"})


@dataclass(frozen=True)
class SampleRow:
    """One line: where it goes (``run``, ``segment``: None when not said), and the ``log_samples`` row."""

    line: int
    step: int
    key: str
    run: str | None
    segment: str | None
    row: dict[str, Any]

    def output(self) -> Output:
        """The row as a checked ``sample`` event body."""
        body = {"step": self.step, "key": self.key, "prompt_id": prompt_id(self.row.get("prompt")), **self.row}
        return Output("sample", sample_body(body))


def samples_path_of(log: Path) -> Path:
    """``FILE.samples.jsonl`` beside ``FILE.jsonl`` / ``FILE.csv``."""
    return log.with_name(log.name.rsplit(".", 1)[0] + ".samples.jsonl")


def load_samples(path: Path) -> list[SampleRow]:
    """Every line of a samples file, checked as the wire checks a sample ([] when there is no file)."""
    if not path.exists():
        return []
    found = []
    with open(path, encoding="utf-8") as f:
        for number, line in enumerate(f, 1):
            if line.strip():
                found.append(_row(_parse(line, path, number), f"{path}:{number}", number))
    return found


def _parse(line: str, path: Path, number: int) -> dict[str, Any]:
    try:
        row = json.loads(line)
    except json.JSONDecodeError as exc:
        raise ImportFailed(f"{path}:{number}", f"not JSON ({exc.msg})") from None
    if not isinstance(row, dict):
        raise ImportFailed(f"{path}:{number}", "not a JSON object")
    return row


def _row(raw: dict[str, Any], where: str, number: int) -> SampleRow:
    unknown = set(raw) - SAMPLE_FIELDS - PLACE_FIELDS
    if unknown:
        raise ImportFailed(where, f"unknown fields {sorted(unknown)}: a sample has {sorted(SAMPLE_FIELDS | PLACE_FIELDS)}")
    step = raw.get("step")
    if isinstance(step, bool) or not isinstance(step, int):
        raise ImportFailed(where, f"'step' must be a whole number, got {step!r}")
    place = {k: raw[k] for k in ("run", "segment") if raw.get(k) not in (None, "")}
    sample = SampleRow(line=number, step=step, key=str(raw.get("key") or "samples"),
                       run=str(place["run"]) if "run" in place else None,
                       segment=str(place["segment"]) if "segment" in place else None,
                       row={k: v for k, v in raw.items() if k in SAMPLE_FIELDS and v is not None})
    try:
        sample.output()
    except EventError as exc:
        raise ImportFailed(where, str(exc)) from None
    return sample
