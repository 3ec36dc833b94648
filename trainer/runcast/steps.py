"""What ``run.log()`` keeps of a call: the step, and each metric's values at growing steps.

A metric keeps the first value logged at each step and its steps must grow (as the server
keeps them): a value at the metric's last step or an earlier one is left out, with one
warning per metric, and counted (``stats.ignored``). Media values (``runcast.Image``, ``Table``,
``Histogram``) are set apart: they become media events at the call's step. A nested dict is
flattened, its keys joined with ``.`` (``{"train": {"loss": x}}`` is ``train.loss``), as W&B names it.
"""

from __future__ import annotations

import logging
import operator
from collections.abc import Callable, Iterable, Mapping
from typing import Any, Literal, overload

from .media import Media
from .values import Deferred, coerce, int_to_float
from .wire.checks import EventError, check_key, check_step
from .wire.limits import MAX_METRICS_PER_EVENT, MAX_STEP, TIMESTAMP_KEY

log = logging.getLogger("runcast")

Accepted = tuple[int, "dict[str, float | Deferred]", "dict[str, Media] | None"]  # (step, values, media)


class Steps:
    """The steps of one run segment's metrics, on the training thread."""

    def __init__(self, resume_step: int | None, on_new_key: Callable[[str], None] | None = None) -> None:
        # the highest step logged so far; a resume continues from the checkpoint of step resume_step
        self.step = -1 if resume_step is None else resume_step
        self.ignored = 0  # metric values left out: a step at or below the key's last one
        self._key_steps: dict[str, int] = {}
        self._keys: set[str] = set()
        self._ignored_keys: set[str] = set()
        self._on_new_key = on_new_key  # called with each metric name logged for the first time

    @property
    def keys(self) -> Iterable[str]:
        """The metric names with a value logged so far."""
        return self._key_steps.keys()

    def accept(self, metrics: Mapping[str, Any], step: int | None,
               check_media: Callable[[dict[str, Media], int], None] | None = None) -> Accepted | None:
        """(step, values, media or None) to record of a ``log(metrics, step)`` call; None when every value is left out.

        ``step`` defaults to the highest step so far plus one. A bad step, metric name or value
        (or media, which ``check_media`` checks) raises (ValueError, TypeError) and records nothing.
        """
        if step is None:
            step = self.step + 1
        elif type(step) is not int or step < 0 or step > MAX_STEP:
            step = checked_step(step)
        if type(metrics) is not dict and not isinstance(metrics, Mapping):
            raise TypeError(f"metrics must be a dict of name -> number, got {type(metrics).__name__}")
        if not metrics or len(metrics) > MAX_METRICS_PER_EVENT:
            raise ValueError(f"log() takes 1 to {MAX_METRICS_PER_EVENT} metrics, got {len(metrics)}")
        key_steps = self._key_steps
        keys = self._keys
        values: dict[str, float | Deferred] = {}
        media: dict[str, Media] | None = None
        nested: dict[str, Any] | None = None
        for key, value in metrics.items():
            if key not in keys:
                self._new_key(key)
            last = key_steps.get(key)
            if last is not None and step <= last:
                self._ignore(key, step, last)
                continue
            kind = type(value)
            if kind is float:
                values[key] = value
            elif kind is int:
                values[key] = int_to_float(key, value)
            elif isinstance(value, Media):
                media = media or {}
                media[key] = value
            elif isinstance(value, Mapping):
                nested = nested or {}
                nested[key] = value
            else:
                values[key] = coerce(key, value)
        if nested:
            values, media = self._flattened(metrics, nested, step, values, media, check_media)
        if not values and not media:
            return None
        if media and check_media is not None:
            check_media(media, step)
        key_steps.update(dict.fromkeys(values, step))
        self.step = max(self.step, step)
        return step, values, media

    def _flattened(self, metrics: Mapping[str, Any], nested: dict[str, Any], step: int,
                   values: dict[str, float | Deferred], media: dict[str, Media] | None,
                   check_media: Callable[[dict[str, Media], int], None] | None,
                   ) -> tuple[dict[str, float | Deferred], dict[str, Media] | None]:
        """The call's values and media with those of its nested dicts added under their flattened names."""
        flat = flatten(nested)
        if not flat:  # only empty dicts: nothing more
            return values, media
        if len(metrics) - len(nested) + len(flat) > MAX_METRICS_PER_EVENT:
            raise ValueError(f"log() takes 1 to {MAX_METRICS_PER_EVENT} metrics, got "
                             f"{len(metrics) - len(nested) + len(flat)} once nested dicts are flattened")
        clash = sorted(set(flat) & set(metrics))
        if clash:
            raise ValueError(f"log(): metric {clash[0]!r} is given both as a name and inside a nested dict")
        more = self.accept(flat, step, check_media)
        if more is not None:
            values = {**values, **more[1]}
            media = {**(media or {}), **more[2]} if more[2] else media
        return values, media

    def _ignore(self, key: str, step: int, last: int) -> None:
        self.ignored += 1
        if key not in self._ignored_keys:
            self._ignored_keys.add(key)
            log.warning(
                "runcast: metric %r was already logged at step %d; its value at step %d is left out (a metric "
                "keeps the first value logged at each step, and its steps must grow). Further cases of %r are "
                "counted in run.stats.ignored, not logged",
                key, last, step, key,
            )

    def _new_key(self, key: Any) -> None:
        try:
            check_key(key, "metrics")
        except EventError as exc:
            raise ValueError(f"bad metric name {key!r}: {exc.message}") from None
        if key == TIMESTAMP_KEY:
            raise ValueError(
                f"bad metric name {key!r}: reserved; the server records each step's wall time under it "
                "(the time log() was called), so it needs no logging"
            )
        self._keys.add(key)
        if self._on_new_key is not None:
            self._on_new_key(key)


@overload
def checked_step(raw: Any, *, optional: Literal[False] = False, field: str = "step") -> int: ...
@overload
def checked_step(raw: Any, *, optional: bool, field: str = "step") -> int | None: ...


def checked_step(raw: Any, *, optional: bool = False, field: str = "step") -> int | None:
    """A step argument (numpy integers too) as the schema's integer; ValueError naming ``field``."""
    if raw is None and optional:
        return None
    if not isinstance(raw, (int, bool)) and hasattr(raw, "__index__"):
        raw = operator.index(raw)  # numpy integers
    try:
        return check_step(raw, field)  # None was answered above
    except EventError as exc:
        raise ValueError(f"{field}: {exc.message}") from None


def flatten(nested: Mapping[str, Any], prefix: str = "") -> dict[str, Any]:
    """``{"a": {"b": 1}}`` as ``{"a.b": 1}``, at any depth (W&B's names for nested values)."""
    out: dict[str, Any] = {}
    for key, value in nested.items():
        name = f"{prefix}{key}"
        if isinstance(value, Mapping):
            out.update(flatten(value, f"{name}."))
        else:
            out[name] = value
    return out
