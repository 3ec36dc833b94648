"""The bodies of what the model says and scores (docs/samples.md): ``sample``, ``eval`` and
``media`` events, checked and normalised like every other type (``bodies.BODY_VALIDATORS``).

This module uses only the standard library: the SDK and the backend import it.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from typing import Any

from .checks import EventError, check_int, check_key, check_step, check_text, choice, json_field, number_map, text_field
from .limits import (
    CONTROL_RE,
    IMAGE_TYPES,
    MAX_CAPTION_CHARS,
    MAX_EVAL_CONFIG_BYTES,
    MAX_EVAL_METRICS,
    MAX_EVAL_VERSIONS_BYTES,
    MAX_HISTOGRAM_BINS,
    MAX_IMAGE_SIDE,
    MAX_OUTPUT_CHARS,
    MAX_PROMPT_CHARS,
    MAX_PROMPT_ID_CHARS,
    MAX_SAMPLE_SCORES,
    MAX_SAMPLE_SETTINGS_BYTES,
    MAX_SUITE_CHARS,
    MAX_TABLE_BYTES,
    MAX_TABLE_CELL_CHARS,
    MAX_TABLE_COLUMNS,
    MAX_TABLE_ROWS,
    MAX_TASK_CHARS,
    MEDIA_KINDS,
    SHA256_RE,
)


def name_field(event: Mapping[str, Any], field: str, max_chars: int) -> str:
    """A short label (prompt id, suite, task): 1..``max_chars`` characters, no control character, not blank
    (a rule every regex dialect states alike: the OpenAPI document holds it as this check does)."""
    value = text_field(event, field, max_chars)
    if not value.strip() or CONTROL_RE.search(value):
        raise EventError(field, f"must be 1-{max_chars} characters without control characters, not blank")
    return value


def sample_body(e: Mapping[str, Any]) -> dict[str, Any]:
    """A text generation: the prompt, what the model wrote, and how it was scored and sampled."""
    out: dict[str, Any] = {
        "step": check_step(e.get("step")),
        "key": check_key(e.get("key"), "key"),
        "prompt_id": name_field(e, "prompt_id", MAX_PROMPT_ID_CHARS),
        "prompt": text_field(e, "prompt", MAX_PROMPT_CHARS),
        "output": text_field(e, "output", MAX_OUTPUT_CHARS),
    }
    if e.get("reference") is not None:
        out["reference"] = text_field(e, "reference", MAX_PROMPT_CHARS)
    if e.get("scores") is not None:
        out["scores"] = number_map(e["scores"], "scores", MAX_SAMPLE_SCORES, allow_empty=True)
    if e.get("settings") is not None:
        out["settings"] = json_field(e, "settings", MAX_SAMPLE_SETTINGS_BYTES)
    return out


def eval_body(e: Mapping[str, Any]) -> dict[str, Any]:
    """One task's scores from one evaluation suite, at a step (and of a checkpoint, when tied to one)."""
    out: dict[str, Any] = {
        "step": check_step(e.get("step")),
        "suite": name_field(e, "suite", MAX_SUITE_CHARS),
        "task": name_field(e, "task", MAX_TASK_CHARS),
        "metrics": number_map(e.get("metrics"), "metrics", MAX_EVAL_METRICS, allow_empty=False),
    }
    if e.get("checkpoint") is not None:
        out["checkpoint"] = check_step(e["checkpoint"], "checkpoint")
    if e.get("n") is not None:
        out["n"] = check_int(e["n"], "n")
    if e.get("config") is not None:
        out["config"] = json_field(e, "config", MAX_EVAL_CONFIG_BYTES)
    if e.get("versions") is not None:
        out["versions"] = json_field(e, "versions", MAX_EVAL_VERSIONS_BYTES)
    return out


def media_body(e: Mapping[str, Any]) -> dict[str, Any]:
    """An image (a blob the server holds), a small table or a histogram's bins, under a key at a step."""
    kind = choice(e, "kind", MEDIA_KINDS)
    out: dict[str, Any] = {"step": check_step(e.get("step")), "key": check_key(e.get("key"), "key"), "kind": kind}
    if e.get("caption") is not None:
        out["caption"] = text_field(e, "caption", MAX_CAPTION_CHARS)
    out.update(_KIND_FIELDS[kind](e))
    return out


def _image(e: Mapping[str, Any]) -> dict[str, Any]:
    blob = e.get("blob")
    if not isinstance(blob, str) or not SHA256_RE.match(blob):
        raise EventError("blob", "must be the SHA-256 of the image's bytes: 64 lowercase hex characters")
    return {
        "blob": blob,
        "content_type": choice(e, "content_type", IMAGE_TYPES),
        "width": check_int(e.get("width"), "width", low=1, high=MAX_IMAGE_SIDE),
        "height": check_int(e.get("height"), "height", low=1, high=MAX_IMAGE_SIDE),
        "size": check_int(e.get("size"), "size", low=1),
    }


def _table(e: Mapping[str, Any]) -> dict[str, Any]:
    columns = e.get("columns")
    if not isinstance(columns, list) or not 1 <= len(columns) <= MAX_TABLE_COLUMNS:
        raise EventError("columns", f"must be a list of 1-{MAX_TABLE_COLUMNS} column names")
    names = [check_key(c, "columns") for c in columns]
    rows = e.get("rows")
    if not isinstance(rows, list) or len(rows) > MAX_TABLE_ROWS:
        raise EventError("rows", f"must be a list of at most {MAX_TABLE_ROWS} rows")
    out_rows = []
    for i, row in enumerate(rows):
        if not isinstance(row, list) or len(row) != len(names):
            raise EventError(f"rows.{i}", f"must be a list of exactly {len(names)} cells, one per column")
        out_rows.append([_cell(cell, f"rows.{i}.{j}") for j, cell in enumerate(row)])
    if len(json.dumps(out_rows, ensure_ascii=False).encode()) > MAX_TABLE_BYTES:
        raise EventError("rows", f"larger than {MAX_TABLE_BYTES} bytes encoded")
    return {"columns": names, "rows": out_rows}


def _cell(raw: Any, field: str) -> str | int | float | bool | None:
    if raw is None or isinstance(raw, bool):
        return raw
    if isinstance(raw, int):
        return check_int(raw, field, low=-(2**63 - 1))
    if isinstance(raw, float):
        if not math.isfinite(raw):
            raise EventError(field, "must be a finite number (or null)")
        return raw
    if isinstance(raw, str):
        if len(raw) > MAX_TABLE_CELL_CHARS:
            raise EventError(field, f"longer than {MAX_TABLE_CELL_CHARS} characters")
        return check_text(raw, field)
    raise EventError(field, f"must be text, a number, a boolean or null, got {type(raw).__name__}")


def _histogram(e: Mapping[str, Any]) -> dict[str, Any]:
    edges, counts = e.get("edges"), e.get("counts")
    if not isinstance(edges, list) or not 2 <= len(edges) <= MAX_HISTOGRAM_BINS + 1:
        raise EventError("edges", f"must be a list of 2-{MAX_HISTOGRAM_BINS + 1} bin edges")
    checked = [_finite(x, f"edges.{i}") for i, x in enumerate(edges)]
    if any(b <= a for a, b in zip(checked, checked[1:])):
        raise EventError("edges", "must increase strictly")
    if not isinstance(counts, list) or len(counts) != len(checked) - 1:
        raise EventError("counts", "must hold one count per bin (one fewer than the edges)")
    out: dict[str, Any] = {"edges": checked, "counts": [_count(c, f"counts.{i}") for i, c in enumerate(counts)]}
    for field in ("nan", "inf", "neg_inf"):
        if e.get(field) is not None:
            out[field] = _count(e[field], field)
    return out


def _finite(raw: Any, field: str) -> float:
    if isinstance(raw, bool) or not isinstance(raw, (int, float)):
        raise EventError(field, "must be a finite number")
    try:
        value = float(raw)
    except OverflowError:  # an integer past a float's range
        raise EventError(field, "must be a finite number") from None
    if not math.isfinite(value):
        raise EventError(field, "must be a finite number")
    return value


def _count(raw: Any, field: str) -> float:
    value = _finite(raw, field)
    if value < 0:
        raise EventError(field, "must not be negative")
    return value


_KIND_FIELDS = {"image": _image, "table": _table, "histogram": _histogram}
