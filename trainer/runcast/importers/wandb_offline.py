"""W&B runs from a local ``wandb/`` directory (offline runs, or online ones not yet deleted).

What ``wandb`` writes for a run is a directory ``offline-run-<time>-<id>/`` (``run-…``
online) holding the transaction log ``run-<id>.wandb``: every record the run made
(run, config, history, exit, …). Current versions write no ``wandb-history.jsonl`` or
``config.yaml`` beside it offline, so the log is the source. It is read with W&B's own
reader, ``wandb leet inspect --json FILE`` (the ``wandb-core`` binary the package ships),
which prints one JSON object per record; no network is used.

The source is a ``.wandb`` file, a run directory or a directory of run directories.
Mapping: one Runcast run per W&B run id (a run resumed offline writes a second
directory with the same id: each directory is a segment, in the order they started);
the run's display name; the config (``run`` record, then ``config`` updates; W&B's own
``_wandb`` key left out); tags as the run's tags (one the wire cannot hold stays in
``env.tags``), notes as its notes, the summary (``summary`` records, W&B's ``_`` keys and
logged objects left out) as its summary; the W&B project to ``env``.
History rows give the points: ``_step`` the step, ``_timestamp`` the time, every
number a metric (``"NaN"``, ``"Infinity"`` included); keys starting with ``_`` (W&B's
bookkeeping) and text are left out. Images, tables and histograms become media
(``wandb_media``; their fields are not metrics).
The ``exit`` record decides the status (exit code 0: finished, else failed); a log with
no ``exit`` record is a run that crashed (its log ends cut short): failed. W&B's
reader skips a damaged stretch of a log and says so on standard error: that is an
error here, since the records after it would be missing.
"""

from __future__ import annotations

import json
import math
import os
import subprocess
import tempfile
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final

from runcast.importers import run_fields, wandb_media
from runcast.importers.model import (
    ImportFailed,
    MissingExtra,
    RunBuilder,
    SourceRun,
)
from runcast.wire.events import NONFINITE

NAME: Final = "wandb"
_INSPECT_TIMEOUT_S: Final = 600
_CUT_SHORT: Final = "reached the end of an incomplete .wandb file"


def log_files(root: Path) -> list[Path]:
    """The ``.wandb`` logs under ``root`` (itself, its run directory, or run directories below), each once."""
    if root.is_file():
        return [root] if root.suffix == ".wandb" else []
    found = {p.resolve() for pattern in ("*.wandb", "*/*.wandb", "*/*/*.wandb") for p in root.glob(pattern)}
    return sorted(found)


@dataclass
class _Log:
    """What one ``.wandb`` file holds."""

    path: Path
    run_id: str = ""
    project: str = ""
    name: str = ""
    start: str = ""
    config: dict[str, Any] = field(default_factory=dict)
    tags: list[str] = field(default_factory=list)
    notes: str = ""
    summary: dict[str, Any] = field(default_factory=dict)
    exit_code: int | None = None
    rows: list[tuple[int, float, dict[str, float]]] = field(default_factory=list)
    media: list[tuple[int, float, str, dict[str, Any]]] = field(default_factory=list)  # step, time, key, fields


def read(root: Path, on_points: Callable[[int], None] = lambda n: None) -> list[SourceRun]:
    files = log_files(root)
    if not files:
        raise ImportFailed(str(root), "no W&B run logs (*.wandb) here")
    core = _core_path(root)
    logs = [_inspect(core, path, on_points) for path in files]
    by_run: dict[str, list[_Log]] = {}
    for log in sorted(logs, key=lambda lg: (lg.start, lg.path.name)):
        by_run.setdefault(f"{log.project}/{log.run_id}", []).append(log)
    return [_run(identity, parts) for identity, parts in by_run.items()]


def _run(identity: str, parts: list[_Log]) -> SourceRun:
    builder = RunBuilder()
    config: dict[str, Any] = {}
    summary: dict[str, Any] = {}
    for log in parts:
        builder.new_segment(log.path.parent.name)
        config.update(log.config)
        for step, ts, values in log.rows:
            try:
                for key, value in values.items():
                    builder.add(key, step, value, ts)
            except ValueError as exc:
                raise ImportFailed(f"{log.path} (step {step})", str(exc)) from None
        for step, ts, key, fields in log.media:
            try:
                for output in wandb_media.outputs(log.path.parent, step, ts, key, fields):
                    builder.add_output(output)
            except (OSError, ValueError) as exc:
                raise ImportFailed(f"{log.path} (step {step}, {key!r})", str(exc)) from None
        summary.update(log.summary)
    last = parts[-1]
    tags, other_tags = run_fields.split_tags(sorted({t for log in parts for t in log.tags}))
    return builder.build(
        format=NAME,
        identity=identity,
        name=next((log.name for log in reversed(parts) if log.name), last.run_id),
        config=config,
        env={
            "imported_from": {"format": NAME, "project": last.project or None, "run_id": last.run_id},
            **({"tags": other_tags} if other_tags else {}),
        },
        status="finished" if last.exit_code == 0 else "failed",
        tags=tags,
        description=run_fields.clip_notes(next((log.notes for log in reversed(parts) if log.notes), None)),
        summary=run_fields.clean_summary(summary),
    )


def _core_path(root: Path) -> str:
    try:
        from wandb.util import get_core_path
    except ImportError:
        raise MissingExtra(f"W&B run logs in {root}", "wandb", "wandb") from None
    return str(get_core_path())


def _inspect(core: str, path: Path, on_points: Callable[[int], None]) -> _Log:
    """Read one log through ``wandb leet inspect --json`` (the call the ``wandb`` CLI makes)."""
    command = [core, "leet", "inspect", "--no-observability", "--json", "--run-file", str(path), str(path.parent.parent)]
    env = {**os.environ, "WANDB_MODE": "offline", "WANDB_ERROR_REPORTING": "false"}
    log = _Log(path=path)
    with tempfile.TemporaryFile("w+") as errors, subprocess.Popen(
        command, stdout=subprocess.PIPE, stderr=errors, env=env, text=True
    ) as proc:
        assert proc.stdout is not None
        for line in proc.stdout:
            try:
                record = json.loads(line)
            except json.JSONDecodeError:
                proc.kill()
                raise ImportFailed(str(path), f"W&B's reader printed something that is not a record: {line[:200]!r}") from None
            _take(log, record, path)
        code = proc.wait(timeout=_INSPECT_TIMEOUT_S)
        errors.seek(0)
        stderr = errors.read()
    # The reader skips a damaged stretch and goes on (exit status 0), saying so on standard
    # error; the one message that loses nothing is the end of a log cut short (a crash).
    complaints = [line for line in stderr.splitlines() if line.strip() and _CUT_SHORT not in line]
    if code != 0 or complaints:
        raise ImportFailed(str(path), f"W&B's reader: {' '.join(complaints)[:500] or f'exit status {code}'}")
    if not log.run_id:
        raise ImportFailed(str(path), "no run record: not a W&B run log")
    on_points(sum(len(values) for _, _, values in log.rows))
    return log


def _take(log: _Log, record: dict[str, Any], path: Path) -> None:
    kind = record.get("type")
    body = record.get(kind) if isinstance(kind, str) else None
    if not isinstance(body, dict):
        return
    if kind == "run":
        _take_run(log, body)
    elif kind == "config":
        _update_config(log, body)
    elif kind == "history":
        _take_history(log, body, f"{path} (record {record.get('num')})")
    elif kind == "summary":
        _update_summary(log, body)
    elif kind == "exit":
        code = body.get("exit_code", 0)
        log.exit_code = code if isinstance(code, int) else 1


def _take_run(log: _Log, body: dict[str, Any]) -> None:
    log.run_id = str(body.get("run_id") or "")
    log.project = str(body.get("project") or "")
    log.name = str(body.get("display_name") or "")
    log.start = str(body.get("start_time") or "")
    log.tags = [str(t) for t in body.get("tags") or []]
    log.notes = str(body.get("notes") or "")
    _update_config(log, body.get("config"))


def _take_history(log: _Log, body: dict[str, Any], where: str) -> None:
    """A history record: its numbers as a row, its media objects apart (``where`` names it in an error)."""
    item = body.get("item") or {}
    step = (body.get("step") or {}).get("num", item.get("_step", 0))
    if not isinstance(step, int):
        raise ImportFailed(where, f"history step {step!r} is not an integer")
    ts = item.get("_timestamp")
    when = float(ts) if isinstance(ts, (int, float)) else math.nan
    objects = wandb_media.objects(item)
    owned = {f"{key}.{name}" for key, fields in objects.items() for name in fields}
    values = {k: v for k, raw in item.items()
              if not k.startswith("_") and k not in owned and (v := _number(raw)) is not None}
    if values:
        log.rows.append((step, when, values))
    log.media.extend((step, when, key, fields) for key, fields in objects.items())


def _update_config(log: _Log, config: Any) -> None:
    update = config.get("update") if isinstance(config, dict) else None
    if isinstance(update, dict):
        log.config.update({k: v for k, v in update.items() if k != "_wandb"})
    remove = config.get("remove") if isinstance(config, dict) else None
    if isinstance(remove, list):
        for key in remove:
            log.config.pop(str(key), None)


def _update_summary(log: _Log, summary: dict[str, Any]) -> None:
    update = summary.get("update")
    if isinstance(update, dict):
        log.summary.update({k: v for k, v in update.items()
                            if not k.startswith("_") and not (isinstance(v, dict) and "_type" in v)})
    remove = summary.get("remove")
    if isinstance(remove, list):
        for item in remove:  # a key, or a summary item naming it
            log.summary.pop(str(item.get("key") if isinstance(item, dict) else item), None)


def _number(raw: Any) -> float | None:
    if isinstance(raw, bool):
        return None
    if isinstance(raw, (int, float)):
        return float(raw)
    if isinstance(raw, str):
        return NONFINITE.get(raw)
    return None
