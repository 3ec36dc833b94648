"""The body of each event type: its fields checked and normalised (``validate_event`` in
``runcast.wire.events`` checks the envelope and calls ``BODY_VALIDATORS[type]``).

This module uses only the standard library: the SDK and the backend import it.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from typing import Any, Final

from .checks import (
    EventError,
    check_define,
    check_int,
    check_step,
    check_tags,
    choice,
    json_field,
    number_map,
    text_field,
)
from .columns import columns_body
from .limits import (
    CHECKPOINT_STATUSES,
    COMMAND_ID_RE,
    COMMAND_OUTCOMES,
    CONTROL_RE,
    FINAL_STATUSES,
    MAX_ALERTS_BYTES,
    MAX_CODE_BYTES,
    MAX_COMMAND_MESSAGE_CHARS,
    MAX_CONFIG_BYTES,
    MAX_ENV_BYTES,
    MAX_GROUP_CHARS,
    MAX_INT,
    MAX_JOB_TYPE_CHARS,
    MAX_MANIFEST_BYTES,
    MAX_METRICS_PER_EVENT,
    MAX_MIX_SOURCES,
    MAX_NAME_CHARS,
    MAX_NOTE_CHARS,
    MAX_PATH_CHARS,
    MAX_SUMMARY_BYTES,
    MAX_VERSION_CHARS,
    PROJECT_RE,
    SHA256_RE,
    TIMESTAMP_KEY,
    VISIBILITIES,
)
from .model_outputs import eval_body, media_body, sample_body
from .policy import PolicyError, check_policy


def _name(e: Mapping[str, Any]) -> str:
    name = text_field(e, "name", MAX_NAME_CHARS)
    if not name or CONTROL_RE.search(name):
        raise EventError("name", "must be non-empty with no control characters")
    return name


def _run_started(e: Mapping[str, Any]) -> dict[str, Any]:
    project = e.get("project")  # absent or null: the project of the token that sends it
    if project is not None and (not isinstance(project, str) or not PROJECT_RE.match(project)):
        raise EventError(
            "project",
            "must be 1-100 characters of A-Z, a-z, 0-9, '.', '_' or '-', starting with a letter or digit",
        )
    name = _name(e)
    seed = check_int(e.get("seed"), "seed", low=-MAX_INT, optional=True)
    out: dict[str, Any] = {
        **({"project": project} if project is not None else {}),
        "name": name,
        "config": json_field(e, "config", MAX_CONFIG_BYTES),
        "code": json_field(e, "code", MAX_CODE_BYTES),
        "env": json_field(e, "env", MAX_ENV_BYTES),
        "seed": seed,
        "resume_step": check_step(e.get("resume_step"), "resume_step", optional=True),
        "visibility": choice(e, "visibility", VISIBILITIES, "public"),
    }
    if e.get("alerts") is not None:
        out["alerts"] = json_field(e, "alerts", MAX_ALERTS_BYTES)
    public_paths = e.get("public_paths", False)
    if not isinstance(public_paths, bool):
        raise EventError("public_paths", "must be true or false")
    if public_paths:
        out["public_paths"] = True
    if e.get("tags") is not None:
        out["tags"] = check_tags(e["tags"])
    if e.get("policy") is not None:
        try:
            out["policy"] = check_policy(e["policy"], text=False)
        except PolicyError as exc:
            raise EventError(exc.field, exc.message) from None
    for field, limit in (("group", MAX_GROUP_CHARS), ("job_type", MAX_JOB_TYPE_CHARS), ("notes", MAX_NOTE_CHARS)):
        if e.get(field) is not None:
            value = text_field(e, field, limit)
            if value.strip():
                out[field] = value
    return out



def _update(e: Mapping[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    if e.get("config") is not None:
        out["config"] = json_field(e, "config", MAX_CONFIG_BYTES)
    if e.get("summary") is not None:
        out["summary"] = json_field(e, "summary", MAX_SUMMARY_BYTES)
    if e.get("define") is not None:
        out["define"] = check_define(e["define"])
    if e.get("name") is not None:
        out["name"] = _name(e)
    if e.get("tags") is not None:
        out["tags"] = check_tags(e["tags"])
    for field, limit in (("group", MAX_GROUP_CHARS), ("notes", MAX_NOTE_CHARS)):
        if e.get(field) is not None:  # "" clears
            out[field] = text_field(e, field, limit)
    if not out:
        raise EventError("config", "an update needs config, summary, define, name, tags, group or notes")
    return out


def _metrics(e: Mapping[str, Any]) -> dict[str, Any]:
    values = number_map(e.get("values"), "values", MAX_METRICS_PER_EVENT, allow_empty=False)
    if TIMESTAMP_KEY in values:
        raise EventError(
            f"values.{TIMESTAMP_KEY}", "is reserved: the server records each step's time (the event's ts) under it"
        )
    return {"step": check_step(e.get("step")), "values": values}


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
        "path": text_field(e, "path", MAX_PATH_CHARS),
        "size": size,
        "sha256": sha,
        "metrics": number_map(
            e.get("metrics", {}), "metrics", MAX_METRICS_PER_EVENT, allow_empty=True
        ),
        "public": public,
        "status": choice(e, "status", CHECKPOINT_STATUSES, "available"),
    }


def _data_mix(e: Mapping[str, Any]) -> dict[str, Any]:
    weights = number_map(
        e.get("weights"), "weights", MAX_MIX_SOURCES, allow_empty=False
    )
    for source, weight in weights.items():
        if not math.isfinite(weight) or weight < 0:
            raise EventError(
                f"weights.{source}", "must be a finite, non-negative number"
            )
    return {"step": check_step(e.get("step")), "weights": weights}


def _manifest(e: Mapping[str, Any]) -> dict[str, Any]:
    version = text_field(e, "version", MAX_VERSION_CHARS)
    if not version:
        raise EventError("version", "must not be empty")
    return {
        "step": check_step(e.get("step"), optional=True),
        "version": version,
        "manifest": json_field(e, "manifest", MAX_MANIFEST_BYTES),
    }


def _note(e: Mapping[str, Any]) -> dict[str, Any]:
    text = text_field(e, "text", MAX_NOTE_CHARS)
    if not text or not text.strip():
        raise EventError("text", "must not be empty")
    return {"step": check_step(e.get("step"), optional=True), "text": text}


def _heartbeat(e: Mapping[str, Any]) -> dict[str, Any]:
    out = {"step": check_step(e.get("step"), optional=True)}
    if e.get("lost") is not None:
        out["lost"] = check_step(e["lost"], "lost")
    return out


def _finished(e: Mapping[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = {
        "step": check_step(e.get("step"), optional=True),
        "status": choice(e, "status", FINAL_STATUSES),
    }
    if e.get("lost") is not None:
        out["lost"] = check_step(e["lost"], "lost")
    return out


def _command_ack(e: Mapping[str, Any]) -> dict[str, Any]:
    command = e.get("command")
    if not isinstance(command, str) or not COMMAND_ID_RE.match(command):
        raise EventError("command", "must be a command id (cmd_ and 8-60 characters of A-Z, a-z, 0-9, '_' or '-')")
    message = text_field(e, "message", MAX_COMMAND_MESSAGE_CHARS) if e.get("message") is not None else ""
    return {"step": check_step(e.get("step"), optional=True), "command": command,
            "outcome": choice(e, "outcome", COMMAND_OUTCOMES), "message": message}


# Each event type's body check: the event in, its normalised body fields out.
BODY_VALIDATORS: Final[dict[str, Callable[[Mapping[str, Any]], dict[str, Any]]]] = {
    "run_started": _run_started,
    "metrics": _metrics,
    "checkpoint": _checkpoint,
    "data_mix": _data_mix,
    "manifest": _manifest,
    "note": _note,
    "heartbeat": _heartbeat,
    "finished": _finished,
    "update": _update,
    "sample": sample_body,
    "eval": eval_body,
    "media": media_body,
    "command_ack": _command_ack,
    "metrics_columns": columns_body,
}

