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

* ``run_started`` (write-once per segment): ``project`` (slug, <= 100 chars; optional: absent
  or null, the run goes to the project of the token that sends it),
  ``name`` (<= 200 chars), ``config`` (JSON object, <= 256 KiB encoded),
  ``code`` (JSON object: sha, branch, remote, dirty, diff; <= 1 MiB encoded),
  ``env`` (JSON object: python, torch, deepspeed, host, world_size, ...; <= 64 KiB),
  ``seed`` (int of at most 64 bits, or null), ``resume_step`` (int >= 0 or null: a resume opens this
  segment from the checkpoint of that step), ``visibility`` (public | unlisted | private),
  ``alerts`` (optional JSON object, <= 16 KiB encoded: per-run detector overrides,
  e.g. ``{"spike": {"k": 10}, "stall": {"after_s": 1800}}``; see docs/alerts.md; the
  server checks the names and ignores an invalid object as a whole),
  ``public_paths`` (optional bool, default false: show the run's filesystem paths, host
  name, user and process id to every reader; otherwise only readers with a token of the
  run's project see them, docs/sdk.md), ``tags`` (optional list of at most ``MAX_TAGS``
  distinct tags, each 1..64 characters without control characters or commas),
  ``group`` (optional, <= 128 chars), ``job_type`` (optional, <= 64 chars), ``notes``
  (optional, <= 10,000 chars), ``policy`` (optional publication policy, ``runcast.wire.policy``;
  stored with the run, before any of its data). A resumed segment's values are ignored: the first wins.
* ``sample``, ``eval``, ``media`` (append-only, once per (segment, seq)): what the model says
  and scores, docs/samples.md (the fields and their limits; ``runcast.wire.model_outputs``).
* ``update`` (append-only; the run's state is the updates folded in trainer order):
  ``config`` (JSON object: top-level keys replace the run's config keys), ``summary``
  (JSON object: top-level keys replace the run's summary keys; <= 64 KiB encoded),
  ``define`` (metric name -> ``{"x": "step" | "tokens" | "time", "summary": "min" | "max" |
  "last" | "none"}``, at most ``MAX_METRICS_PER_EVENT``), ``name`` (as in run_started: the run's
  new name), ``tags`` (the run's whole new set of tags, as in run_started), ``group`` and ``notes``
  (as in run_started; ``""`` clears); at least one of them. The name, tags, group and notes of
  the last such update in trainer order replace the run's when it is stored.
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
* ``command_ack`` (once per command, docs/commands.md): ``command`` (the id the server gave the
  command, ``cmd_...``), ``step`` (or null: where the trainer applied it), ``outcome`` (``applied`` |
  ``refused``), ``message`` (optional, <= 1,000 chars: what the trainer did or why it refused).
* ``metrics_columns``: many ``metrics`` events of this run and segment as columns, ``steps``,
  ``times`` and ``values`` (key -> one value or null per step); stored exactly as those events
  (``runcast.wire.columns``). Each row counts as an event against ``MAX_BATCH_EVENTS``.
* ``finished``: ``step`` (or null), ``status`` (one of ``FINAL_STATUSES``), ``lost``
  (as in ``heartbeat``).

A batch (the body of ``POST /api/v1/ingest``) is ``{"v": 1, "events": [...]}``
with at most ``MAX_BATCH_EVENTS`` events and ``MAX_BATCH_BYTES`` bytes.

The schema is kept in four modules, all re-exported here (import them from
``runcast.wire.events``): ``runcast.wire.limits`` (the numbers and patterns above),
``runcast.wire.checks`` (``EventError``, the wire form of floats, the checks of single
fields), ``runcast.wire.bodies`` (each type's body check) and this one (ids, the envelope,
batches).

This module uses only the standard library: it is imported by the SDK inside
training jobs and by the backend.
"""

from __future__ import annotations

import json
import secrets
from collections.abc import Mapping, Sequence
from typing import Any

from . import columns
from .bodies import BODY_VALIDATORS
from .checks import (
    GOOD_IDS,
    NONFINITE,
    EventError,
    check_define,
    check_int,
    check_json,
    check_key,
    check_step,
    check_tags,
    check_text,
    decode_value,
    encode_value,
    remember,
)
from .limits import (
    CHECKPOINT_STATUSES,
    COLUMNS_TYPE,
    COMMAND_ID_RE,
    COMMAND_KINDS,
    COMMAND_OUTCOMES,
    COMPATIBLE_BATCH_EVENTS,
    EVENT_TYPES,
    FINAL_STATUSES,
    ID_RE,
    MAX_ALERTS_BYTES,
    MAX_BATCH_BYTES,
    MAX_BATCH_EVENTS,
    MAX_BATCH_POINTS,
    MAX_CODE_BYTES,
    MAX_CONFIG_BYTES,
    MAX_ENV_BYTES,
    MAX_GROUP_CHARS,
    MAX_INT,
    MAX_JOB_TYPE_CHARS,
    MAX_JSON_DEPTH,
    MAX_KEY_BYTES,
    MAX_MANIFEST_BYTES,
    MAX_METRICS_PER_EVENT,
    MAX_MIX_SOURCES,
    MAX_NAME_CHARS,
    MAX_NOTE_CHARS,
    MAX_PATH_CHARS,
    MAX_PROJECT_CHARS,
    MAX_SEQ,
    MAX_STEP,
    MAX_SUMMARY_BYTES,
    MAX_TAG_CHARS,
    MAX_TAGS,
    MAX_TS,
    MAX_VERSION_CHARS,
    PROJECT_RE,
    SCHEMA_VERSION,
    SHA256_RE,
    SUMMARIES,
    SYSTEM_PREFIX,
    TIMESTAMP_KEY,
    VISIBILITIES,
    X_AXES,
)

# The schema's public names, wherever they are defined (the backend and the SDK import them from here).
__all__ = [
    "CHECKPOINT_STATUSES",
    "COLUMNS_TYPE",
    "COMMAND_ID_RE",
    "COMMAND_KINDS",
    "COMMAND_OUTCOMES",
    "COMPATIBLE_BATCH_EVENTS",
    "EVENT_TYPES",
    "EventError",
    "FINAL_STATUSES",
    "ID_RE",
    "MAX_ALERTS_BYTES",
    "MAX_BATCH_BYTES",
    "MAX_BATCH_EVENTS",
    "MAX_BATCH_POINTS",
    "MAX_CODE_BYTES",
    "MAX_CONFIG_BYTES",
    "MAX_ENV_BYTES",
    "MAX_GROUP_CHARS",
    "MAX_INT",
    "MAX_JOB_TYPE_CHARS",
    "MAX_JSON_DEPTH",
    "MAX_KEY_BYTES",
    "MAX_MANIFEST_BYTES",
    "MAX_METRICS_PER_EVENT",
    "MAX_MIX_SOURCES",
    "MAX_NAME_CHARS",
    "MAX_NOTE_CHARS",
    "MAX_PATH_CHARS",
    "MAX_PROJECT_CHARS",
    "MAX_SEQ",
    "MAX_STEP",
    "MAX_SUMMARY_BYTES",
    "MAX_TAGS",
    "MAX_TAG_CHARS",
    "MAX_TS",
    "MAX_VERSION_CHARS",
    "NONFINITE",
    "PROJECT_RE",
    "SCHEMA_VERSION",
    "SHA256_RE",
    "SUMMARIES",
    "SYSTEM_PREFIX",
    "TIMESTAMP_KEY",
    "VISIBILITIES",
    "X_AXES",
    "check_define",
    "check_int",
    "check_json",
    "check_key",
    "check_step",
    "check_tags",
    "check_text",
    "decode_value",
    "dumps_batch",
    "encode_event",
    "encode_value",
    "is_system_event",
    "new_id",
    "validate_batch",
    "validate_event",
]


def new_id() -> str:
    """A fresh run or segment id: 16 random URL-safe characters, never starting with '-'
    (which a command line would read as an option)."""
    while (value := secrets.token_urlsafe(12)).startswith("-"):
        pass
    return value


# --- system metrics ----------------------------------------------------------------


def is_system_event(event: Mapping[str, Any]) -> bool:
    """A ``metrics`` event whose every key is a system metric (``SYSTEM_PREFIX``)."""
    values = event.get("values")
    return (
        event.get("type") == "metrics"
        and isinstance(values, Mapping)
        and bool(values)
        and all(isinstance(k, str) and k.startswith(SYSTEM_PREFIX) for k in values)
    )


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
        if type(value) is str and value in GOOD_IDS:
            continue
        if not isinstance(value, str) or not ID_RE.match(value):
            raise EventError(
                field, "must be 8-64 characters of A-Z, a-z, 0-9, '_' or '-'"
            )
        remember(GOOD_IDS, value)
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
    out.update(BODY_VALIDATORS[kind](event))
    return out


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
    if any(e["type"] == COLUMNS_TYPE for e in out):  # rows count as events, cells as points
        count = columns.event_count(out)
        if count > MAX_BATCH_EVENTS:
            raise EventError("events", f"holds {count} events (a columnar event's rows counted), more than "
                                       f"{MAX_BATCH_EVENTS}")
        count = sum(map(columns.points, out))
        if count > MAX_BATCH_POINTS:
            raise EventError("events", f"holds {count} points, more than {MAX_BATCH_POINTS}")
    return out


def encode_event(event: Mapping[str, Any]) -> dict[str, Any]:
    """A validated event back in wire form (non-finite values as strings)."""
    if event.get("type") == COLUMNS_TYPE:
        return columns.encode_columns_event(event)
    out = dict(event)
    for field in ("values", "metrics", "weights", "scores"):
        if field in out and isinstance(out[field], dict):
            out[field] = {k: encode_value(v) for k, v in out[field].items()}
    return out


def dumps_batch(events: Sequence[Mapping[str, Any]]) -> bytes:
    """Serialise wire events as a batch body (strict JSON)."""
    return json.dumps(
        {"v": SCHEMA_VERSION, "events": events}, allow_nan=False, separators=(",", ":")
    ).encode()
