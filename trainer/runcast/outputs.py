"""What the model says and scores (docs/samples.md): ``run.log_samples``, ``run.log_eval`` and the
media of ``run.log`` / ``run.log_media``, checked on the caller's thread.

Every body goes through ``events.validate_event`` (the run's ``check``) before anything is
queued: a caller's mistake raises ``ValueError`` (or ``TypeError``) naming the argument, and
nothing of the call is recorded. Samples, evaluations and tables are queued at once; images
and histograms are handed to the media worker (``media_worker``), created with the first of
them. A run that records nothing (another rank) checks and stops there.
"""

from __future__ import annotations

import dataclasses
import hashlib
import logging
import operator
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any

from .media import Media
from .media_worker import MediaStats, MediaWorker
from .steps import checked_step
from .values import json_object, wire_numbers
from .wire.checks import EventError, check_key

log = logging.getLogger("runcast")

Put = Callable[[str, float, int | None, Any], None]  # queue an event: (type, ts, step, body)
Check = Callable[[str, Mapping[str, Any]], None]  # validate an event body of a type (raises EventError)


def prompt_id(prompt: Any) -> Any:
    """The default prompt id: the first 16 hex digits of the prompt's SHA-256 (the same prompt, the same id)."""
    if not isinstance(prompt, str):
        return prompt  # the check names the prompt
    return hashlib.sha256(prompt.encode("utf-8", "surrogatepass")).hexdigest()[:16]


class Outputs:
    """The samples, evaluations and media of one run segment."""

    def __init__(self, *, put: Put, check: Check, seq: Iterator[int], step: Callable[[], int],
                 live: Callable[[], bool]) -> None:
        self._put, self._check, self._seq = put, check, seq
        self._step = step  # the run's highest step so far (-1 before the first)
        self._live = live
        self.start_worker: Callable[[], MediaWorker] | None = None  # set by a run that records
        self.worker: MediaWorker | None = None
        self.lost = 0  # media whose snapshot failed on the training thread
        self._warned: set[str] = set()  # their keys, logged once each

    def at(self, step: Any) -> int:
        """``step``, or the run's current step when None (0 before the first)."""
        return max(self._step(), 0) if step is None else checked_step(step)

    def samples(self, rows: Sequence[Mapping[str, Any]], step: Any, key: str) -> None:
        at = self.at(step)
        if isinstance(rows, Mapping) or not isinstance(rows, Sequence):
            raise TypeError(f"log_samples: rows must be a list of dicts, got {type(rows).__name__}")
        bodies = [self._sample(row, i, at, key) for i, row in enumerate(rows)]
        for body in bodies:
            self._put("sample", time.time(), None, body)

    def _sample(self, row: Any, i: int, step: int, key: str) -> dict[str, Any]:
        if not isinstance(row, Mapping):
            raise TypeError(f"log_samples: rows[{i}] must be a dict, got {type(row).__name__}")
        unknown = set(row) - {"prompt", "output", "prompt_id", "reference", "scores", "settings"}
        if unknown:
            raise ValueError(f"log_samples: rows[{i}] has unknown fields {sorted(map(str, unknown))}")
        body = {"step": step, "key": key, "prompt_id": row.get("prompt_id"), "prompt": row.get("prompt"),
                "output": row.get("output")}
        if body["prompt_id"] is None:
            body["prompt_id"] = prompt_id(body["prompt"])
        if row.get("reference") is not None:
            body["reference"] = row["reference"]
        if row.get("scores") is not None:
            body["scores"] = wire_numbers(row["scores"], f"rows[{i}].scores")
        if row.get("settings") is not None:
            body["settings"] = json_object(row["settings"], f"rows[{i}].settings")
        self._checked("sample", body, f"rows.{i}.")
        return body

    def evals(self, results: Mapping[str, Any], step: Any, suite: str, checkpoint: Any, config: Any, versions: Any,
              n: Any) -> None:
        common: dict[str, Any] = {"step": self.at(step), "suite": suite}
        if checkpoint is not None:
            common["checkpoint"] = _checkpoint(checkpoint)
        if n is not None:
            common["n"] = operator.index(n) if not isinstance(n, bool) and hasattr(n, "__index__") else n
        for name, value in (("config", config), ("versions", versions)):
            if value is not None:
                common[name] = json_object(value, name)
        bodies = []
        for task, metrics in _tasks(results).items():
            body = {**common, "task": task, "metrics": wire_numbers(metrics, f"results.{task}")}
            try:
                self._check("eval", body)
            except EventError as exc:  # the task's name or metrics: name them as results.<task>
                field = f"results.{task}.{exc.field}" if exc.field == "task" or exc.field.startswith("metrics") \
                    else exc.field
                raise EventError(field, exc.message) from None
            bodies.append(body)
        for body in bodies:
            self._put("eval", time.time(), None, body)

    def check_media(self, items: Mapping[str, Media], step: int) -> None:
        """Check ``key -> Image | Table | Histogram`` at ``step`` as events (the caption; the keys too)."""
        for key, item in items.items():
            self._checked("media", {"step": step, "key": key, "caption": item.caption, **item.stub()}, "")

    def media(self, items: Mapping[str, Media], step: int) -> None:
        """Record ``key -> Image | Table | Histogram`` at ``step`` (checked by ``check_media``)."""
        if not self._live():
            return
        for key, item in items.items():
            body = {"step": step, "key": key, "kind": item.kind}
            if item.caption is not None:
                body["caption"] = item.caption
            try:
                prepared = item.snapshot()
            except Exception as exc:  # noqa: BLE001 - the data's fault (a file gone, a device error): the run goes on
                self.lost += 1
                (log.debug if key in self._warned else log.warning)(
                    "runcast: %s %r at step %d was not recorded: %s", item.kind, key, step, exc)
                self._warned.add(key)
                continue
            if prepared is None:  # a table: its fields are known
                self._put("media", time.time(), None, {**body, **item.stub()})
                continue
            if self.worker is None:
                assert self.start_worker is not None  # a live run has one
                self.worker = self.start_worker()
            self.worker.submit(next(self._seq), time.time(), body, prepared)

    def log_media(self, key: Any, item: Any, step: Any) -> None:
        """``run.log_media``: one Image, Table or Histogram under ``key``."""
        if not isinstance(item, Media):
            raise TypeError(f"log_media: media must be a runcast.Image, Table or Histogram, got {type(item).__name__}")
        try:
            check_key(key, "key")
        except EventError as exc:
            raise ValueError(f"log_media: {exc}") from None
        at = self.at(step)
        self.check_media({key: item}, at)
        self.media({key: item}, at)

    def stats(self) -> MediaStats:
        made = self.worker.stats() if self.worker is not None else MediaStats()
        return dataclasses.replace(made, failed=made.failed + self.lost)

    def _checked(self, kind: str, body: Mapping[str, Any], prefix: str) -> None:
        try:
            self._check(kind, body)
        except EventError as exc:
            raise EventError(prefix + exc.field, exc.message) from None


def _tasks(results: Any) -> dict[str, dict[str, Any]]:
    """``{task: {metric: value}}`` of nested or ``"task/metric"`` results."""
    if not isinstance(results, Mapping) or not results:
        raise ValueError("log_eval: results must be a non-empty dict: {task: {metric: value}} or {'task/metric': value}")
    tasks: dict[str, dict[str, Any]] = {}
    for name, value in results.items():
        if isinstance(value, Mapping):
            tasks.setdefault(name, {}).update(value)
            continue
        task, slash, metric = str(name).rpartition("/")
        if not slash or not task or not metric:
            raise ValueError(f"log_eval: results[{name!r}] must be a dict of metrics, or the key 'task/metric'")
        tasks.setdefault(task, {})[metric] = value
    return tasks


def _checkpoint(raw: Any) -> int:
    """A checkpoint named by its step: an integer, or ``"step:N"``."""
    if isinstance(raw, str):
        label, colon, number = raw.partition(":")
        if label != "step" or not colon or not number.isdigit():
            raise ValueError(f"log_eval: checkpoint must be a step (an integer, or 'step:N'), got {raw!r}")
        raw = int(number)
    return checked_step(raw, field="checkpoint")
