"""Results files of lm-evaluation-harness (``lm_eval --output_path``), read as they are.

The harness writes one JSON object per evaluation. What each version holds (read in the
source of 0.3.0, 0.4.0, 0.4.2, 0.4.4, 0.4.8 and 0.4.13):

* 0.3: ``results`` (task -> ``{metric: value, metric_stderr: value}``), ``versions`` (task ->
  integer) and ``config`` (model, model_args, num_fewshot, batch_size, limit, ...).
* 0.4.0: metric names become ``metric,filter`` (``acc,none``, ``acc_stderr,none``); each row
  also has an ``alias``; ``groups`` (the groups' rows, also in ``results``), ``configs``
  (each task's YAML config), ``n-shot`` and ``git_hash`` are added.
* 0.4.2: ``group_subtasks``, ``date`` (epoch seconds), ``transformers_version`` and
  ``pretty_env_info``; a stderr the harness cannot compute (one document) is ``"N/A"``.
* 0.4.4: ``higher_is_better`` and ``n-samples`` (task -> ``{original, effective}``), the
  model's and tokenizer's details. 0.4.13: ``lm_eval_version``, and each row has ``name`` and
  ``sample_len`` (documents scored), a group's row ``sample_count``.

Every row of ``results`` (tasks and groups), then any row of ``groups`` not in it, is one
``TaskScores``: its metrics are the row's numbers under the harness's own names (NaN kept;
``alias``, ``name``, ``sample_len``, ``samples`` and ``sample_count`` are the harness's
bookkeeping; a value that is not a number, ``"N/A"``, is left out and counted). A row with
no number is left out (a group that does not aggregate). ``n`` is the row's ``n-samples``
``effective`` count, else its ``sample_len``.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final

from runcast.importers.model import ImportFailed
from runcast.values import json_object
from runcast.wire.checks import EventError, check_key, check_text
from runcast.wire.events import encode_value
from runcast.wire.limits import MAX_EVAL_CONFIG_BYTES, MAX_EVAL_METRICS, MAX_EVAL_VERSIONS_BYTES

SUITE: Final = "lm-eval-harness"
BOOKKEEPING: Final = frozenset({"alias", "name", "sample_len", "samples", "sample_count"})
_VERSION_KEYS: Final = (("lm_eval", "lm_eval_version"), ("git_hash", "git_hash"), ("upper_git_hash", "upper_git_hash"),
                        ("date", "date"), ("transformers", "transformers_version"))
_CLIPPED: Final = "…"


@dataclass(frozen=True)
class TaskScores:
    """One task's (or group's) row: metrics in wire form, and what the ``eval`` event carries with them."""

    task: str
    metrics: dict[str, float | str]
    n: int | None
    config: dict[str, Any]
    versions: dict[str, Any]
    left_out: tuple[str, ...] = ()  # metric names whose value is not a number ("N/A")


@dataclass
class HarnessResults:
    """A results file: its rows in file order, the rows with no number, when it was made."""

    tasks: list[TaskScores]
    empty: list[str] = field(default_factory=list)
    date: float | None = None


def read(path: Path) -> HarnessResults:
    """The rows of one results file; ImportFailed naming the file (and the row) when it is not one."""
    where = str(path)
    try:
        doc = json.loads(path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise ImportFailed(where, exc.strerror or str(exc)) from None
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise ImportFailed(where, f"not a JSON results file ({exc})") from None
    if not isinstance(doc, dict) or not isinstance(doc.get("results"), dict):
        raise ImportFailed(where, "not an lm-evaluation-harness results file: no 'results' object")
    rows: dict[str, Any] = dict(doc["results"])
    groups = doc.get("groups")
    if isinstance(groups, dict):
        rows.update({name: row for name, row in groups.items() if name not in rows})
    run_config = _mapping(doc.get("config"))
    found = HarnessResults(tasks=[], date=_date(doc.get("date")))
    for task, row in rows.items():
        scores = _task(doc, task, row, run_config, f"{where} (results.{task})")
        if scores is None:
            found.empty.append(task)
        else:
            found.tasks.append(scores)
    if not found.tasks:
        raise ImportFailed(where, "no task with a score: nothing to import")
    return found


def _task(doc: dict[str, Any], task: str, row: Any, run_config: dict[str, Any], where: str) -> TaskScores | None:
    if not isinstance(row, dict):
        raise ImportFailed(where, "a task's results must be an object of metric -> value")
    if not task.strip() or not task.isprintable() or len(task) > 200:
        raise ImportFailed(where, "a task name must be 1-200 printable characters")
    metrics: dict[str, float | str] = {}
    left_out = []
    for name, value in row.items():
        if name in BOOKKEEPING or not name.strip():
            continue
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            left_out.append(name)
            continue
        try:
            check_key(name, "metrics")
        except EventError as exc:
            raise ImportFailed(where, f"metric {name[:60]!r}: {exc.message}") from None
        metrics[name] = encode_value(float(value))
    if not metrics:
        return None
    if len(metrics) > MAX_EVAL_METRICS:
        raise ImportFailed(where, f"{len(metrics)} metrics, more than the {MAX_EVAL_METRICS} an evaluation holds")
    return TaskScores(task=task, metrics=metrics, n=_n(doc, task, row), config=_config(doc, task, run_config, where),
                      versions=_versions(doc, task, where), left_out=tuple(left_out))


def _n(doc: dict[str, Any], task: str, row: dict[str, Any]) -> int | None:
    counts = _mapping(doc.get("n-samples")).get(task)
    effective = counts.get("effective") if isinstance(counts, dict) else None
    for value in (effective, row.get("sample_len")):
        if isinstance(value, int) and not isinstance(value, bool) and value >= 0:
            return value
    return None


def _config(doc: dict[str, Any], task: str, run_config: dict[str, Any], where: str) -> dict[str, Any]:
    """``task``: the task's config (``configs``), ``run``: the evaluation's (``config``), and the task's
    ``n-shot``, ``higher_is_better``, ``n-samples`` and ``group_subtasks`` where the file has them."""
    out: dict[str, Any] = {}
    task_config = _mapping(doc.get("configs")).get(task)
    if isinstance(task_config, dict):
        out["task"] = task_config
    if run_config:
        out["run"] = run_config
    for key in ("n-shot", "higher_is_better", "n-samples", "group_subtasks"):
        value = _mapping(doc.get(key)).get(task)
        if value is not None:
            out[key] = value
    return fit(out, MAX_EVAL_CONFIG_BYTES, where)


def _versions(doc: dict[str, Any], task: str, where: str) -> dict[str, Any]:
    """The task's version and the harness's: its version, git hashes, date, transformers version."""
    out: dict[str, Any] = {}
    version = _mapping(doc.get("versions")).get(task)
    if version is not None:
        out["task"] = version
    for name, key in _VERSION_KEYS:
        if doc.get(key) is not None:
            out[name] = doc[key]
    return fit(out, MAX_EVAL_VERSIONS_BYTES, where)


def fit(obj: dict[str, Any], max_bytes: int, where: str) -> dict[str, Any]:
    """``obj`` as wire JSON within ``max_bytes`` encoded: texts longer than 4,096, 2,048, ... 16
    characters are clipped (ending in "…") until it fits; ImportFailed when even that does not."""
    try:
        value: dict[str, Any] = _clean(json_object(obj, "config"))
    except (ValueError, EventError) as exc:
        raise ImportFailed(where, str(exc)) from None
    limit = 4096
    while _size(value) > max_bytes:
        if limit < 16:
            raise ImportFailed(where, f"its configuration does not fit in {max_bytes} bytes, even with texts clipped")
        value = _clip(value, limit)
        limit //= 2
    return value


def _clean(value: Any) -> Any:
    """Text the wire holds: a NUL or lone surrogate becomes U+FFFD (a file of another tool may hold one)."""
    if isinstance(value, str):
        try:
            return check_text(value, "text")
        except EventError:
            return value.encode("utf-16", "surrogatepass").decode("utf-16", "replace").replace("\x00", "\ufffd")
    if isinstance(value, dict):
        return {_clean(k): _clean(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_clean(v) for v in value]
    return value


def _clip(value: Any, limit: int) -> Any:
    if isinstance(value, str):
        return value if len(value) <= limit else value[: limit - 1] + _CLIPPED
    if isinstance(value, dict):
        return {k: _clip(v, limit) for k, v in value.items()}
    if isinstance(value, list):
        return [_clip(v, limit) for v in value]
    return value


def _size(value: Any) -> int:
    return len(json.dumps(value, allow_nan=False, separators=(",", ":")).encode())


def _mapping(value: Any) -> dict[str, Any]:
    return dict(value) if isinstance(value, Mapping) else {}


def _date(value: Any) -> float | None:
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value) \
        and value >= 0 else None
