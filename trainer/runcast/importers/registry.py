"""The formats ``runcast import`` reads, how a source's format is recognised, and reading one.

Recognition, first match wins (``--format`` skips it):

* a URI (``http(s)://``, ``sqlite:``, ``file:``, ``postgresql:``, ...): an MLflow tracking URI;
* a directory: by what it holds: ``*tfevents*`` files (TensorBoard), ``*.wandb`` logs up
  to two levels down (W&B), an MLflow store (``mlflow.db``, or ``<id>/meta.yaml``); a
  directory holding more than one of these must be given a ``--format``;
* a file: ``*tfevents*`` (TensorBoard), ``*.wandb`` (W&B), an SQLite database (MLflow);
  text by its first line: a CSV header ``segment,key,step,value`` or a JSON object with
  exactly those fields (a Runcast export), a CSV with ``Step`` and ``<run> - <metric>``
  columns (a W&B chart export), anything else a training log (JSONL or CSV).

Heavy readers (tensorboard, mlflow, wandb) are imported only when their format is read;
a missing one raises ``MissingExtra`` naming the extra to install.
"""

from __future__ import annotations

import csv
import json
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Final

from runcast.importers import (
    mlflow_runs,
    runcast_export,
    tensorboard_logs,
    training_log,
    wandb_csv,
    wandb_offline,
)
from runcast.importers.model import ImportFailed, SourceRun

FORMATS: Final = (
    tensorboard_logs.NAME,
    mlflow_runs.NAME,
    wandb_offline.NAME,
    wandb_csv.NAME,
    training_log.NAME,
    runcast_export.NAME,
)


@dataclass(frozen=True)
class ReadOptions:
    """Options some formats take: notes for a training log, MLflow experiments, a progress callback."""

    events_path: Path | None = None
    experiments: Sequence[str] = ()
    on_points: Callable[[int], None] = lambda n: None


def detect(source: str) -> str:
    """The format of ``source``; ImportFailed when it cannot be told."""
    if mlflow_runs.is_uri(source):
        return mlflow_runs.NAME
    path = Path(source)
    if not path.exists():
        raise ImportFailed(source, "no such file or directory")
    if path.is_dir():
        found = [
            name
            for name, present in (
                (tensorboard_logs.NAME, any(True for _ in _event_files(path))),
                (wandb_offline.NAME, bool(wandb_offline.log_files(path))),
                (mlflow_runs.NAME, mlflow_runs.is_store(path)),
            )
            if present
        ]
        if len(found) == 1:
            return found[0]
        if found:
            raise ImportFailed(source, f"holds {' and '.join(found)} data: say which with --format")
        raise ImportFailed(source, "no TensorBoard, W&B or MLflow data here: give files, or --format")
    if "tfevents" in path.name:
        return tensorboard_logs.NAME
    if path.suffix == ".wandb":
        return wandb_offline.NAME
    if mlflow_runs.is_store(path):
        return mlflow_runs.NAME
    return _text_format(path)


def read(source: str, fmt: str | None = None, options: ReadOptions | None = None) -> list[SourceRun]:
    """Every run of ``source`` (format ``fmt``, else detected), fully read and checked."""
    options = options or ReadOptions()
    fmt = fmt or detect(source)
    if fmt == mlflow_runs.NAME:
        return mlflow_runs.read(source, options.experiments, options.on_points)
    path = Path(source)
    if not path.exists():
        raise ImportFailed(source, "no such file or directory")
    if fmt == tensorboard_logs.NAME:
        return tensorboard_logs.read(path, options.on_points)
    if fmt == wandb_offline.NAME:
        return wandb_offline.read(path, options.on_points)
    if path.is_dir():
        raise ImportFailed(source, f"a {fmt} source is a file, not a directory")
    if fmt == wandb_csv.NAME:
        runs = wandb_csv.read(path)
    elif fmt == training_log.NAME:
        runs = training_log.read(path, options.events_path)
    elif fmt == runcast_export.NAME:
        runs = runcast_export.read(path)
    else:
        raise ImportFailed(source, f"unknown format {fmt!r}: one of {', '.join(FORMATS)}")
    options.on_points(sum(run.points for run in runs))
    return runs


def _event_files(root: Path) -> Iterator[Path]:
    return (p for p in root.rglob("*tfevents*") if p.is_file())


def _text_format(path: Path) -> str:
    try:
        with open(path, newline="", encoding="utf-8-sig") as f:
            head = f.readline()
    except UnicodeDecodeError:
        raise ImportFailed(str(path), "not a format runcast import reads (binary, and not an event file, .wandb log or SQLite store)") from None
    except OSError as exc:
        raise ImportFailed(str(path), exc.strerror or str(exc)) from None
    if head.lstrip().startswith("{"):
        try:
            first = json.loads(head)
        except json.JSONDecodeError:
            return training_log.NAME  # its reader names the line
        if isinstance(first, dict) and set(first) in (set(runcast_export.COLUMNS), set(runcast_export.UNTIMED)):
            return runcast_export.NAME
        return training_log.NAME
    fields = next(csv.reader([head]), None)
    if runcast_export.is_export_header(fields):
        return runcast_export.NAME
    if wandb_csv.looks_like(fields):
        return wandb_csv.NAME
    return training_log.NAME
