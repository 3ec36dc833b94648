"""The event schema: the one contract between the SDK and the backend.

Every event is a JSON object with these envelope fields:

==========  =======================================================================
field       meaning and limits
==========  =======================================================================
``v``       schema version, ``SCHEMA_VERSION`` (an integer)
``type``    one of ``EVENT_TYPES``
``run``     run id, 8-64 chars of ``[A-Za-z0-9_-]``; made by the SDK (``new_id``)
``segment`` segment id, same alphabet: one ``init()`` of a run, made by the SDK.
            A resumed run opens a new segment at its resume step.
``seq``     0 <= seq < 2**53, numbered per segment by the SDK from 0.
            ``(run, segment, seq)`` is the idempotency key: an event delivered
            twice is stored once.
``ts``      wall-clock seconds since the epoch at the trainer: 0 <= ts <= ``MAX_TS``
            (the end of year 9999)
==========  =======================================================================

What every store and reader can hold, checked here so that the SDK (at the call),
the API (before 202) and the worker refuse the same things:

* text (names, paths, versions, notes, metric names, every string inside a JSON
  object, keys included) holds Unicode scalar values only: no lone surrogate
  (``"\ud800"``) and no NUL character;
* JSON objects (``config``, ``code``, ``env``, ``alerts``, ``manifest``) nest at most
  ``MAX_JSON_DEPTH`` levels (the object itself is level 1), hold finite numbers and
  integers of at most 64 bits (``MAX_INT``), and stay under their byte limit;
* every integer fits its column: steps and seq < 2**53, ``seed`` and ``size``
  within 64 bits.

Type-specific fields (append-only types add history; write-once types are kept
as first written):

* ``run_started`` (write-once per segment): ``project`` (slug, <= 100 chars),
  ``name`` (<= 200 chars), ``config`` (JSON object, <= 256 KiB encoded),
  ``code`` (JSON object: sha, branch, remote, dirty, diff; <= 1 MiB encoded),
  ``env`` (JSON object: python, torch, deepspeed, host, world_size, ...; <= 64 KiB),
  ``seed`` (int of at most 64 bits, or null), ``resume_step`` (int >= 0 or null: a resume opens this
  segment at that step), ``visibility`` (public | unlisted | private),
  ``alerts`` (optional JSON object, <= 16 KiB encoded: per-run detector overrides,
  e.g. ``{"spike": {"k": 10}, "stall": {"after_s": 1800}}``; see docs/alerts.md; the
  server checks the names and ignores an invalid object as a whole),
  ``public_paths`` (optional bool, default false: show the run's filesystem paths, host
  name, user and process id to every reader; otherwise only readers with a token of the
  run's project see them, docs/sdk.md), ``tags`` (optional list of at most ``MAX_TAGS``
  distinct tags, each 1..64 characters without control characters or commas),
  ``group`` (optional, <= 128 chars), ``job_type`` (optional, <= 64 chars), ``notes``
  (optional, <= 10,000 chars), ``policy`` (optional publication policy, ``runcast.policy``;
  stored with the run, before any of its data). A resumed segment's values are ignored: the first wins.
* ``update`` (append-only; the run's state is the updates folded in trainer order):
  ``config`` (JSON object: top-level keys replace the run's config keys), ``summary``
  (JSON object: top-level keys replace the run's summary keys; <= 64 KiB encoded),
  ``define`` (metric name -> ``{"x": "step" | "tokens" | "time", "summary": "min" | "max" |
  "last" | "none"}``, at most ``MAX_METRICS_PER_EVENT``); at least one of them.
* ``metrics`` (append-only, write-once per (segment, key, step)): ``step``,
  ``values`` (1..``MAX_METRICS_PER_EVENT`` entries of key -> number). Keys are
  1..200 bytes of UTF-8 with no control characters. Values are floats; NaN and
  +-Inf are legal and travel as the strings ``"NaN"``, ``"Infinity"``,
  ``"-Infinity"`` so that the wire format stays strict JSON.
* ``checkpoint``: ``step``, ``path`` (<= 4096 chars; the server serves it only
  under its project's directory of the storage root, docs/artifacts.md), ``size``
  (bytes, 0 <= size <= ``MAX_INT``),
  ``sha256`` (64 hex chars or null), ``metrics`` (key -> number), ``public``
  (bool), ``status`` (available | pruned).
* ``data_mix``: ``step``, ``weights`` (source -> weight >= 0, 1..256 sources).
* ``manifest``: ``step`` (or null), ``version`` (<= 100 chars), ``manifest``
  (JSON object, <= 1 MiB encoded).
* ``note``: ``step`` (or null), ``text`` (1..10,000 chars).
* ``heartbeat``: ``step`` (or null), ``lost`` (optional int >= 0: events of this
  segment the SDK could not keep so far, e.g. with the disk full; a hole in the run).
* ``finished``: ``step`` (or null), ``status`` (one of ``FINAL_STATUSES``), ``lost``
  (as in ``heartbeat``).

A batch (the body of ``POST /api/v1/ingest``) is ``{"v": 1, "events": [...]}``
with at most ``MAX_BATCH_EVENTS`` events and ``MAX_BATCH_BYTES`` bytes.

This module uses only the standard library: it is imported by the SDK inside
training jobs and by the backend.
"""

from __future__ import annotations

import json
import math
import re
import secrets
from collections.abc import Mapping
from typing import Any, Final

from runcast.policy import PolicyError, check_policy

SCHEMA_VERSION: Final = 1

EVENT_TYPES: Final = (
    "run_started",
    "metrics",
    "checkpoint",
    "data_mix",
    "manifest",
    "note",
    "heartbeat",
    "finished",
    "update",
)
FINAL_STATUSES: Final = ("finished", "failed", "killed")
VISIBILITIES: Final = ("public", "unlisted", "private")
CHECKPOINT_STATUSES: Final = ("available", "pruned")

MAX_BATCH_EVENTS: Final = 1000
MAX_BATCH_BYTES: Final = 8 * 1024 * 1024
MAX_METRICS_PER_EVENT: Final = 1000
MAX_KEY_BYTES: Final = 200
MAX_STEP: Final = 2**53 - 1
MAX_SEQ: Final = 2**53 - 1
MAX_INT: Final = 2**63 - 1  # a signed 64-bit column (seed, size, integers inside JSON objects)
MAX_TS: Final = 253_402_300_799.0  # 9999-12-31T23:59:59Z: any date library can show it
MAX_JSON_DEPTH: Final = 64
MAX_NAME_CHARS: Final = 200
MAX_PROJECT_CHARS: Final = 100
MAX_NOTE_CHARS: Final = 10_000
MAX_PATH_CHARS: Final = 4096
MAX_VERSION_CHARS: Final = 100
MAX_MIX_SOURCES: Final = 256
MAX_CONFIG_BYTES: Final = 256 * 1024
MAX_CODE_BYTES: Final = 1024 * 1024
MAX_ENV_BYTES: Final = 64 * 1024
MAX_MANIFEST_BYTES: Final = 1024 * 1024
MAX_ALERTS_BYTES: Final = 16 * 1024
# Keys the SDK's system sampler sends (runcast.system): system/<node>/rank<r>/<name>, the step
# a wall-clock second. An event holding only such keys does not move the run's step, last
# values or heartbeat.
SYSTEM_PREFIX: Final = "system/"
MAX_SUMMARY_BYTES: Final = 64 * 1024
MAX_TAGS: Final = 64
MAX_TAG_CHARS: Final = 64
MAX_GROUP_CHARS: Final = 128
MAX_JOB_TYPE_CHARS: Final = 64
X_AXES: Final = ("step", "tokens", "time")
SUMMARIES: Final = ("min", "max", "last", "none")

ID_RE: Final = re.compile(r"^[A-Za-z0-9_-]{8,64}$")
PROJECT_RE: Final = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,99}$")
SHA256_RE: Final = re.compile(r"^[0-9a-f]{64}$")
_CONTROL_RE: Final = re.compile(r"[\x00-\x1f\x7f-\x9f]")
_SURROGATE_RE: Final = re.compile("[\ud800-\udfff]")

# The wire strings of the non-finite floats (encode_value writes them, decode_value and the importers read them).
NONFINITE: Final = {"NaN": math.nan, "Infinity": math.inf, "-Infinity": -math.inf}

# Metric names and run/segment ids that passed their check: a batch repeats the same few
# in every event, and the server validates hundreds of thousands of events a minute.
# Only strings that passed are added; the sets are emptied when they grow past the limit.
_GOOD_KEYS: set[str] = set()
_GOOD_IDS: set[str] = set()
_GOOD_MAX: Final = 4096


class EventError(ValueError):
    """An event, or a field of one, breaks the schema.

    ``index`` is the event's position in its batch (None outside a batch) and
    ``field`` the offending field, dotted for nested ones (``values.loss``).
    """

    def __init__(self, field: str, message: str, index: int | None = None) -> None:
        super().__init__(message)
        self.field = field
        self.message = message
        self.index = index

    def __str__(self) -> str:
        where = f"event {self.index}, " if self.index is not None else ""
        return f"{where}field {self.field!r}: {self.message}"

    def as_dict(self) -> dict[str, Any]:
        return {"index": self.index, "field": self.field, "message": self.message}


def new_id() -> str:
    """A fresh run or segment id: 16 random URL-safe characters, never starting with '-'
    (which a command line would read as an option)."""
    while (value := secrets.token_urlsafe(12)).startswith("-"):
        pass
    return value


# --- values -------------------------------------------------------------------------


def is_system_event(event: Mapping[str, Any]) -> bool:
    """A ``metrics`` event whose every key is a system metric (``SYSTEM_PREFIX``)."""
    values = event.get("values")
    return (
        event.get("type") == "metrics"
        and isinstance(values, Mapping)
        and bool(values)
        and all(isinstance(k, str) and k.startswith(SYSTEM_PREFIX) for k in values)
    )


def encode_value(value: float) -> float | str:
    """A float as it travels: finite as a number, NaN and +-Inf as strings."""
    if math.isfinite(value):
        return value
    if math.isnan(value):
        return "NaN"
    return "Infinity" if value > 0 else "-Infinity"


def decode_value(raw: Any, field: str = "value") -> float:
    """The float a wire value stands for; raises EventError for anything else."""
    if isinstance(raw, bool):
        raise EventError(field, "must be a number, not a boolean")
    if isinstance(raw, float):
        return raw
    if isinstance(raw, int):
        try:
            return float(raw)
        except OverflowError:
            raise EventError(field, "integer too large for a float") from None
    if isinstance(raw, str) and raw in NONFINITE:
        return NONFINITE[raw]
    raise EventError(
        field,
        f"must be a number (or 'NaN', 'Infinity', '-Infinity'), got {type(raw).__name__}",
    )


def check_key(key: Any, field: str = "values") -> str:
    """Validate a metric name: 1..200 UTF-8 bytes, no control characters."""
    if not isinstance(key, str):
        raise EventError(
            field, f"metric names must be strings, got {type(key).__name__}"
        )
    if not key:
        raise EventError(field, "metric name must not be empty")
    if not key.isascii() and _SURROGATE_RE.search(key):
        raise EventError(f"{field}.{key[:40]!a}", "metric name holds a lone surrogate (not Unicode text)")
    if len(key.encode("utf-8")) > MAX_KEY_BYTES:
        raise EventError(
            f"{field}.{key[:40]}", f"metric name longer than {MAX_KEY_BYTES} bytes"
        )
    if _CONTROL_RE.search(key):
        raise EventError(f"{field}.{key!r}", "metric name contains control characters")
    _remember(_GOOD_KEYS, key)
    return key


def _remember(good: set[str], value: str) -> None:
    if len(good) >= _GOOD_MAX:
        good.clear()
    good.add(value)


def check_text(value: str, field: str) -> str:
    """Refuse text that UTF-8 or a database cannot hold: a lone surrogate or a NUL character."""
    if "\x00" in value:
        raise EventError(field, "holds a NUL character")
    if not value.isascii() and _SURROGATE_RE.search(value):
        raise EventError(field, "holds a lone surrogate (not a Unicode scalar value)")
    return value


def check_int(raw: Any, field: str, *, low: int = 0, high: int = MAX_INT, optional: bool = False) -> int | None:
    """Validate an integer in [low, high] (booleans are not integers)."""
    if raw is None and optional:
        return None
    if isinstance(raw, bool) or not isinstance(raw, int):
        raise EventError(field, f"must be an integer, got {type(raw).__name__}")
    if not low <= raw <= high:
        raise EventError(field, f"must be an integer in [{low}, {high}]")
    return raw


def check_json(raw: Any, field: str, max_bytes: int) -> dict[str, Any]:
    """Validate a JSON object: depth, text, numbers, then its encoded size.

    Iterative, so a hostile nesting depth costs no recursion before it is refused.
    """
    if not isinstance(raw, dict):
        raise EventError(field, "must be a JSON object")
    stack: list[tuple[Any, int, str]] = [(raw, 1, field)]
    while stack:
        value, depth, where = stack.pop()
        if isinstance(value, dict):
            if depth > MAX_JSON_DEPTH:
                raise EventError(where, f"nested more than {MAX_JSON_DEPTH} levels deep")
            for key, item in value.items():
                if not isinstance(key, str):
                    raise EventError(where, "object keys must be strings")
                check_text(key, where)
                stack.append((item, depth + 1, f"{where}.{key[:40]}" if depth < 8 else where))
        elif isinstance(value, list):
            if depth > MAX_JSON_DEPTH:
                raise EventError(where, f"nested more than {MAX_JSON_DEPTH} levels deep")
            stack.extend((item, depth + 1, where) for item in value)
        elif isinstance(value, str):
            check_text(value, where)
        elif isinstance(value, bool) or value is None:
            pass
        elif isinstance(value, int):
            if not -MAX_INT <= value <= MAX_INT:
                raise EventError(where, f"integers must lie in [-{MAX_INT}, {MAX_INT}]")
        elif isinstance(value, float):
            if not math.isfinite(value):
                raise EventError(where, "numbers must be finite")
        else:
            raise EventError(where, f"{type(value).__name__} is not JSON")
    size = len(json.dumps(raw, allow_nan=False, separators=(",", ":")).encode())
    if size > max_bytes:
        raise EventError(field, f"encodes to {size} bytes, more than {max_bytes}")
    return raw


def check_step(raw: Any, field: str = "step", *, optional: bool = False) -> int | None:
    """Validate a step: an integer in [0, 2**53)."""
    if raw is None and optional:
        return None
    if isinstance(raw, bool) or not isinstance(raw, int):
        raise EventError(field, f"must be an integer, got {type(raw).__name__}")
    if raw < 0:
        raise EventError(field, "must not be negative")
    if raw > MAX_STEP:
        raise EventError(field, f"must be at most {MAX_STEP}")
    return raw


# --- helpers for validation ---------------------------------------------------------


def _str(
    event: Mapping[str, Any], field: str, max_chars: int, *, optional: bool = False
) -> str | None:
    raw = event.get(field)
    if raw is None and optional:
        return None
    if not isinstance(raw, str):
        raise EventError(field, "must be a string")
    if len(raw) > max_chars:
        raise EventError(field, f"longer than {max_chars} characters")
    return check_text(raw, field)


def _json_obj(event: Mapping[str, Any], field: str, max_bytes: int) -> dict[str, Any]:
    raw = event.get(field)
    if raw is None:
        return {}
    return check_json(raw, field, max_bytes)


def _number_map(
    raw: Any, field: str, max_entries: int, *, allow_empty: bool
) -> dict[str, float]:
    if not isinstance(raw, dict):
        raise EventError(field, "must be a JSON object of name -> number")
    if not raw and not allow_empty:
        raise EventError(field, "must hold at least one entry")
    if len(raw) > max_entries:
        raise EventError(field, f"holds {len(raw)} entries, more than {max_entries}")
    out: dict[str, float] = {}
    good = _GOOD_KEYS
    for key, value in raw.items():
        if type(key) is not str or key not in good:
            check_key(key, field)
        # A float needs no decoding (and no field name for an error): the usual value.
        out[key] = value if type(value) is float else decode_value(value, f"{field}.{key}")
    return out


def _choice(
    event: Mapping[str, Any],
    field: str,
    choices: tuple[str, ...],
    default: str | None = None,
) -> str:
    raw = event.get(field, default)
    if raw not in choices:
        raise EventError(field, f"must be one of {', '.join(choices)}")
    return raw


# --- one event -----------------------------------------------------------------------


def validate_event(event: Any) -> dict[str, Any]:
    """Check one wire event and return it normalised (values decoded to floats).

    Raises EventError naming the field. Unknown fields are dropped.
    """
    if not isinstance(event, dict):
        raise EventError("event", "must be a JSON object")
    version = event.get("v", SCHEMA_VERSION)
    if version != SCHEMA_VERSION:
        raise EventError(
            "v",
            f"unsupported schema version {version!r}; this server speaks {SCHEMA_VERSION}",
        )
    kind = event.get("type")
    if kind not in EVENT_TYPES:
        raise EventError("type", f"must be one of {', '.join(EVENT_TYPES)}")
    for field in ("run", "segment"):
        value = event.get(field)
        if type(value) is str and value in _GOOD_IDS:
            continue
        if not isinstance(value, str) or not ID_RE.match(value):
            raise EventError(
                field, "must be 8-64 characters of A-Z, a-z, 0-9, '_' or '-'"
            )
        _remember(_GOOD_IDS, value)
    seq = event.get("seq")
    if isinstance(seq, bool) or not isinstance(seq, int) or not 0 <= seq <= MAX_SEQ:
        raise EventError("seq", f"must be an integer in [0, {MAX_SEQ}]")
    ts = event.get("ts")
    if (
        isinstance(ts, bool)
        or not isinstance(ts, (int, float))
        or not 0 <= ts <= MAX_TS
    ):
        raise EventError(
            "ts", f"must be a number of seconds since the epoch in [0, {MAX_TS:.0f}]"
        )
    out: dict[str, Any] = {
        "v": SCHEMA_VERSION,
        "type": kind,
        "run": event["run"],
        "segment": event["segment"],
        "seq": seq,
        "ts": float(ts),
    }
    out.update(_BODY_VALIDATORS[kind](event))
    return out


def _run_started(e: Mapping[str, Any]) -> dict[str, Any]:
    project = e.get("project")
    if not isinstance(project, str) or not PROJECT_RE.match(project):
        raise EventError(
            "project",
            "must be 1-100 characters of A-Z, a-z, 0-9, '.', '_' or '-', starting with a letter or digit",
        )
    name = _str(e, "name", MAX_NAME_CHARS)
    if not name or _CONTROL_RE.search(name):
        raise EventError("name", "must be non-empty with no control characters")
    seed = check_int(e.get("seed"), "seed", low=-MAX_INT, optional=True)
    out = {
        "project": project,
        "name": name,
        "config": _json_obj(e, "config", MAX_CONFIG_BYTES),
        "code": _json_obj(e, "code", MAX_CODE_BYTES),
        "env": _json_obj(e, "env", MAX_ENV_BYTES),
        "seed": seed,
        "resume_step": check_step(e.get("resume_step"), "resume_step", optional=True),
        "visibility": _choice(e, "visibility", VISIBILITIES, "public"),
    }
    if e.get("alerts") is not None:
        out["alerts"] = _json_obj(e, "alerts", MAX_ALERTS_BYTES)
    public_paths = e.get("public_paths", False)
    if not isinstance(public_paths, bool):
        raise EventError("public_paths", "must be true or false")
    if public_paths:
        out["public_paths"] = True
    if e.get("tags") is not None:
        out["tags"] = check_tags(e["tags"])
    if e.get("policy") is not None:
        try:
            out["policy"] = check_policy(e["policy"])
        except PolicyError as exc:
            raise EventError(exc.field, exc.message) from None
    for field, limit in (("group", MAX_GROUP_CHARS), ("job_type", MAX_JOB_TYPE_CHARS), ("notes", MAX_NOTE_CHARS)):
        if e.get(field) is not None:
            value = _str(e, field, limit)
            if value.strip():
                out[field] = value
    return out


def check_tags(raw: Any, field: str = "tags") -> list[str]:
    """A list of distinct tags (order kept): 1..64 characters, no control characters, no commas."""
    if not isinstance(raw, list):
        raise EventError(field, "must be a list of strings")
    if len(raw) > MAX_TAGS:
        raise EventError(field, f"holds {len(raw)} tags, more than {MAX_TAGS}")
    out: list[str] = []
    for i, tag in enumerate(raw):
        where = f"{field}.{i}"
        if not isinstance(tag, str) or not tag.strip():
            raise EventError(where, "must be a non-empty string")
        if len(tag) > MAX_TAG_CHARS:
            raise EventError(where, f"longer than {MAX_TAG_CHARS} characters")
        if _CONTROL_RE.search(tag) or "," in tag:
            raise EventError(where, "must hold no control characters and no commas")
        check_text(tag, where)
        if tag not in out:
            out.append(tag)
    return out


def check_define(raw: Any, field: str = "define") -> dict[str, dict[str, str]]:
    """Metric declarations: name -> {"x": one of X_AXES, "summary": one of SUMMARIES}."""
    if not isinstance(raw, dict) or not raw:
        raise EventError(field, "must be a non-empty JSON object of metric name -> declaration")
    if len(raw) > MAX_METRICS_PER_EVENT:
        raise EventError(field, f"holds {len(raw)} entries, more than {MAX_METRICS_PER_EVENT}")
    out: dict[str, dict[str, str]] = {}
    for key, decl in raw.items():
        check_key(key, field)
        if not isinstance(decl, dict):
            raise EventError(f"{field}.{key}", "must be an object with 'x' and 'summary'")
        out[key] = {
            "x": _choice(decl, "x", X_AXES, "step"),
            "summary": _choice(decl, "summary", SUMMARIES, "last"),
        }
    return out


def _update(e: Mapping[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    if e.get("config") is not None:
        out["config"] = _json_obj(e, "config", MAX_CONFIG_BYTES)
    if e.get("summary") is not None:
        out["summary"] = _json_obj(e, "summary", MAX_SUMMARY_BYTES)
    if e.get("define") is not None:
        out["define"] = check_define(e["define"])
    if not out:
        raise EventError("config", "an update needs config, summary or define")
    return out


def _metrics(e: Mapping[str, Any]) -> dict[str, Any]:
    return {
        "step": check_step(e.get("step")),
        "values": _number_map(
            e.get("values"), "values", MAX_METRICS_PER_EVENT, allow_empty=False
        ),
    }


def _checkpoint(e: Mapping[str, Any]) -> dict[str, Any]:
    size = check_int(e.get("size"), "size")
    sha = e.get("sha256")
    if sha is not None and (not isinstance(sha, str) or not SHA256_RE.match(sha)):
        raise EventError("sha256", "must be 64 lowercase hex characters or null")
    public = e.get("public", True)
    if not isinstance(public, bool):
        raise EventError("public", "must be true or false")
    return {
        "step": check_step(e.get("step")),
        "path": _str(e, "path", MAX_PATH_CHARS),
        "size": size,
        "sha256": sha,
        "metrics": _number_map(
            e.get("metrics", {}), "metrics", MAX_METRICS_PER_EVENT, allow_empty=True
        ),
        "public": public,
        "status": _choice(e, "status", CHECKPOINT_STATUSES, "available"),
    }


def _data_mix(e: Mapping[str, Any]) -> dict[str, Any]:
    weights = _number_map(
        e.get("weights"), "weights", MAX_MIX_SOURCES, allow_empty=False
    )
    for source, weight in weights.items():
        if not math.isfinite(weight) or weight < 0:
            raise EventError(
                f"weights.{source}", "must be a finite, non-negative number"
            )
    return {"step": check_step(e.get("step")), "weights": weights}


def _manifest(e: Mapping[str, Any]) -> dict[str, Any]:
    version = _str(e, "version", MAX_VERSION_CHARS)
    if not version:
        raise EventError("version", "must not be empty")
    return {
        "step": check_step(e.get("step"), optional=True),
        "version": version,
        "manifest": _json_obj(e, "manifest", MAX_MANIFEST_BYTES),
    }


def _note(e: Mapping[str, Any]) -> dict[str, Any]:
    text = _str(e, "text", MAX_NOTE_CHARS)
    if not text or not text.strip():
        raise EventError("text", "must not be empty")
    return {"step": check_step(e.get("step"), optional=True), "text": text}


def _heartbeat(e: Mapping[str, Any]) -> dict[str, Any]:
    out = {"step": check_step(e.get("step"), optional=True)}
    if e.get("lost") is not None:
        out["lost"] = check_step(e["lost"], "lost")
    return out


def _finished(e: Mapping[str, Any]) -> dict[str, Any]:
    out = {
        "step": check_step(e.get("step"), optional=True),
        "status": _choice(e, "status", FINAL_STATUSES),
    }
    if e.get("lost") is not None:
        out["lost"] = check_step(e["lost"], "lost")
    return out


_BODY_VALIDATORS = {
    "run_started": _run_started,
    "metrics": _metrics,
    "checkpoint": _checkpoint,
    "data_mix": _data_mix,
    "manifest": _manifest,
    "note": _note,
    "heartbeat": _heartbeat,
    "finished": _finished,
    "update": _update,
}


# --- batches -------------------------------------------------------------------------


def validate_batch(body: Any) -> list[dict[str, Any]]:
    """Check a whole batch; the first bad event raises EventError with its index."""
    if not isinstance(body, dict):
        raise EventError("body", 'must be a JSON object {"v": 1, "events": [...]}')
    version = body.get("v", SCHEMA_VERSION)
    if version != SCHEMA_VERSION:
        raise EventError(
            "v",
            f"unsupported schema version {version!r}; this server speaks {SCHEMA_VERSION}",
        )
    events = body.get("events")
    if not isinstance(events, list):
        raise EventError("events", "must be a list")
    if not events:
        raise EventError("events", "must hold at least one event")
    if len(events) > MAX_BATCH_EVENTS:
        raise EventError(
            "events", f"holds {len(events)} events, more than {MAX_BATCH_EVENTS}"
        )
    out = []
    for index, event in enumerate(events):
        try:
            out.append(validate_event(event))
        except EventError as exc:
            exc.index = index
            raise
    return out


def encode_event(event: Mapping[str, Any]) -> dict[str, Any]:
    """A validated event back in wire form (non-finite values as strings)."""
    out = dict(event)
    for field in ("values", "metrics", "weights"):
        if field in out and isinstance(out[field], dict):
            out[field] = {k: encode_value(v) for k, v in out[field].items()}
    return out


def dumps_batch(events: list[Mapping[str, Any]]) -> bytes:
    """Serialise wire events as a batch body (strict JSON)."""
    return json.dumps(
        {"v": SCHEMA_VERSION, "events": events}, allow_nan=False, separators=(",", ":")
    ).encode()
