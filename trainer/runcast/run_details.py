"""What describes a run, as ``Run`` attributes whose changes reach the server (as W&B's do).

``run.name``, ``run.tags``, ``run.group``, ``run.notes``, ``run.config``, ``run.summary`` and
``run.define_metric``: each change is checked on the caller's thread (a refused value raises
ValueError naming the field and changes nothing) and queued as an ``update`` event, so it keeps
its place among the run's other events, spools offline and travels with ``runcast sync``.
"""

from __future__ import annotations

import fnmatch
import time
from collections.abc import Iterable, Mapping
from typing import Any

from .record import Synced
from .wire import events
from .wire.events import EventError

GOALS = {"minimize": "min", "maximize": "max"}  # W&B's define_metric(goal=) as the summary it picks


class Details:
    """The described state of a run; ``Run`` provides ``_check`` and ``_put``."""

    def _describe(self, started: Mapping[str, Any]) -> None:
        self._name: str = started["name"]
        self._tags: tuple[str, ...] = tuple(started.get("tags") or ())
        self._group: str | None = started.get("group")
        self.job_type: str | None = started.get("job_type")
        self._notes: str | None = started.get("notes")
        self._config = Synced("config", started["config"], self._update)
        self._summary = Synced("summary", {}, self._update)
        self._declared: set[str] = set()  # metrics declared by name
        self._globs: dict[str, dict[str, str]] = {}  # glob -> declaration, applied to each matching metric

    def _check(self, kind: str, body: Mapping[str, Any]) -> None:
        raise NotImplementedError

    def _put(self, kind: str, ts: float, step: int | None, body: Any, *, final: bool = False) -> None:
        raise NotImplementedError

    def _update(self, body: dict[str, Any]) -> None:
        """Queue an ``update`` event, checked here first."""
        self._check("update", body)
        self._put("update", time.time(), None, body)

    def _describe_field(self, field: str, value: Any) -> Any:
        if value is None:
            raise ValueError(f"run.{field}: must be a string ({field})")
        try:
            self._update({field: value})
        except EventError as exc:
            raise ValueError(f"run.{field}: {exc.message} ({exc.field})") from None
        return value

    @property
    def name(self) -> str:
        """The run's name; setting it renames the run on the server."""
        return self._name

    @name.setter
    def name(self, value: str) -> None:
        self._name = self._describe_field("name", value)

    @property
    def tags(self) -> tuple[str, ...]:
        """The run's tags; setting them (any sequence of strings) replaces the run's tags on the server."""
        return self._tags

    @tags.setter
    def tags(self, value: Iterable[str]) -> None:
        if isinstance(value, str):
            raise ValueError("run.tags: must be a sequence of tags, not one string (tags)")
        try:
            tags = events.check_tags(list(value))  # distinct, in order
        except EventError as exc:
            raise ValueError(f"run.tags: {exc.message} ({exc.field})") from None
        self._tags = tuple(self._describe_field("tags", tags))

    @property
    def group(self) -> str | None:
        """The run's group; setting it moves the run on the server (``""`` or None: no group)."""
        return self._group

    @group.setter
    def group(self, value: str | None) -> None:
        self._group = self._describe_field("group", value or "") or None

    @property
    def notes(self) -> str | None:
        """The run's notes; setting them replaces them on the server (``""`` or None: none)."""
        return self._notes

    @notes.setter
    def notes(self, value: str | None) -> None:
        self._notes = self._describe_field("notes", value or "") or None

    @property
    def config(self) -> Synced:
        """The run's config: a mapping; setting keys (``run.config["lr"] = x``, ``run.config.update(d)``)
        sends them, and the server replaces those keys of the stored config."""
        return self._config

    @config.setter
    def config(self, value: Any) -> None:
        self._config.update(value)

    @property
    def summary(self) -> Synced:
        """Figures that describe the whole run (best accuracy, final loss, runtime): a mapping whose
        keys are sent when set; shown on the run page and in ``GET /runs/{id}`` under ``summary``."""
        return self._summary

    def define_metric(self, name: str, step_metric: str | None = None, *, x: str | None = None,
                      summary: str | None = None, goal: str | None = None, **wandb: Any) -> None:
        """Declare metric ``name`` (or every metric matching a glob, ``"val/*"``): its x axis
        (``step``, ``tokens`` or ``time``; ``step_metric=`` is W&B's name for it) and the figure the
        run's summary shows for it (``min``, ``max``, ``last`` or ``none``; ``best`` with ``goal=``
        ``"minimize"`` or ``"maximize"``; ``goal=`` alone picks ``min`` or ``max``), computed by the
        server over every stored point. A value set in ``run.summary`` wins over it. W&B's
        ``hidden``, ``step_sync`` and ``overwrite`` are accepted and have no effect.
        """
        unknown = set(wandb) - {"hidden", "step_sync", "overwrite"}
        if unknown:
            raise TypeError(f"define_metric() got an unexpected keyword argument {sorted(unknown)[0]!r}")
        if step_metric is not None:
            if step_metric not in events.X_AXES:
                raise ValueError(f"define_metric: step_metric must be one of {', '.join(events.X_AXES)} "
                                 f"(the run's x axes), got {step_metric!r}")
            if x is not None and x != step_metric:
                raise ValueError("define_metric: give x or step_metric, not both")
            x = step_metric
        if goal is not None and goal not in GOALS:
            raise ValueError(f"define_metric: goal must be 'minimize' or 'maximize', got {goal!r}")
        if summary == "best" or (summary is None and goal is not None):
            if goal is None:
                raise ValueError("define_metric: summary='best' needs goal='minimize' or 'maximize'")
            summary = GOALS[goal]
        try:
            define = events.check_define({name: {"x": x or "step", "summary": summary or "last"}})
        except EventError as exc:
            raise ValueError(f"define_metric: {exc.message} ({exc.field})") from None
        self._update({"define": define})
        if not any(c in name for c in "*?["):
            self._declared.add(name)
            return
        self._globs.pop(name, None)  # a glob defined again is the last one defined
        self._globs[name] = define[name]
        matched = [key for key in self._seen() if self._matches(key) is define[name]]  # logged before it
        for i in range(0, len(matched), events.MAX_METRICS_PER_EVENT):
            self._update({"define": dict.fromkeys(matched[i:i + events.MAX_METRICS_PER_EVENT], define[name])})

    def _seen(self) -> Iterable[str]:
        """The metric names logged so far (``Run`` answers)."""
        return ()

    def _matches(self, key: str) -> dict[str, str] | None:
        """The declaration of the last glob defined that matches ``key``, unless ``key`` was declared by name."""
        if key in self._declared:
            return None
        found = None
        for glob, declaration in self._globs.items():
            if fnmatch.fnmatchcase(key, glob):
                found = declaration
        return found

    def _new_metric(self, key: str) -> None:
        """A metric logged for the first time: declared as a glob defined before says."""
        declaration = self._matches(key)
        if declaration is not None:
            self._update({"define": {key: declaration}})
