"""What the OpenAPI document cannot state, for the suite's Schemathesis run (test_schemathesis.py).

JSON Schema constrains one value at a time, and not how a number is spelled. The server's rules
that relate two values, or a value and the server's own state or settings, and its reading of
integers (``2``, not ``2.0``) are written in the document's descriptions only, and a
schema-valid request that breaks one is rightly refused; Schemathesis would count that as
"schema-valid request rejected" (ST202). ``map_case`` makes each *positive* case keep exactly
these rules, by the least change, and nothing else: a refusal of any other kind on the same
operations still counts. Negative cases are left as generated.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from typing import Any

import schemathesis
from schemathesis import Case, GenerationMode, HookContext

# A loopback URL (the test's server may call 127.0.0.1: RUNCAST_WEBHOOK_ALLOW_CIDRS); nothing listens there.
WEBHOOK_URL = "http://127.0.0.1:9/hook"
MAX_FUZZ_FILE_BYTES = 1 << 20  # far under the server's upload limit, and 10_000 of them within 64 bits


def _true(value: Any) -> bool:
    return str(value).lower() == "true"


def _estimate(case: Case) -> None:
    """Optimizer offload needs a ZeRO stage of 1 or more (routes/estimate.py)."""
    query = case.query or {}
    if _true(query.get("offload_optimizer")) and int(query.get("zero", 0)) == 0:
        query["zero"] = 1


def _range(case: Case) -> None:
    """``end`` is not less than ``start`` (metrics.queries.query_metrics)."""
    query = case.query or {}
    if query.get("start") is not None and query.get("end") is not None and int(query["end"]) < int(query["start"]):
        query["start"], query["end"] = query["end"], query["start"]


def _upload(case: Case) -> None:
    """A file checkpoint lists one file, named like it; no path twice, none both a file and a
    directory; the sizes within the server's upload limit (artifacts.uploads.check_manifest)."""
    body = case.body
    if not isinstance(body, dict) or not isinstance(body.get("files"), list) or not body["files"]:
        return
    files = [f for f in body["files"] if isinstance(f, dict)]
    if body.get("kind") == "file":
        files = [{**files[0], "path": body.get("name")}]
    kept: list[dict[str, Any]] = []
    for f in files:
        path = str(f.get("path"))
        parents = {path.rsplit("/", i)[0] for i in range(1, path.count("/") + 1)}
        taken = {k["path"] for k in kept}
        if path in taken or parents & taken or any(k["path"].startswith(path + "/") for k in kept):
            continue
        kept.append({**f, "size": min(f.get("size", 0), MAX_FUZZ_FILE_BYTES)})
    body["files"] = kept


def _ingest(case: Case) -> None:
    """A table row holds one cell per column; a histogram's edges increase strictly and it has one
    count per bin (runcast.wire.model_outputs)."""
    body = case.body
    for event in body.get("events", []) if isinstance(body, dict) else []:
        if not isinstance(event, dict) or event.get("type") != "media":
            continue
        if event.get("kind") == "table" and isinstance(event.get("columns"), list):
            width = len(event["columns"])
            event["rows"] = [(list(row) + [None] * width)[:width] for row in event.get("rows", [])]
        if event.get("kind") == "histogram":
            edges = sorted(set(event.get("edges", [])))
            event["edges"] = edges if len(edges) >= 2 else [0, 1]
            counts = list(event.get("counts", []))
            event["counts"] = (counts + [0] * len(event["edges"]))[: len(event["edges"]) - 1]


def _export(case: Case) -> None:
    """Samples and evaluations export as JSONL or Parquet, and ``key`` selects metrics or samples only
    (routes/export.py)."""
    query = case.query or {}
    if query.get("what") in ("samples", "evals") and query.get("format") == "csv":
        query["format"] = "jsonl"
    if query.get("what") == "evals":
        query.pop("key", None)


def _blob(case: Case) -> None:
    """The path's sha256 is the body's SHA-256 (artifacts.blobs.store_blob). The body itself is left
    alone: a positive case's is a real file of its image type, and a body a hook changes is no
    longer counted as schema-valid (Schemathesis cannot validate binary bodies)."""
    data = getattr(case.body, "data", case.body)  # schemathesis' Binary holds the bytes
    if isinstance(data, bytes) and case.path_parameters is not None:
        case.path_parameters["sha256"] = hashlib.sha256(data).hexdigest()


def _subscription(case: Case) -> None:
    """A webhook must reach an address the server may call: here the one it is told it may."""
    if isinstance(case.body, dict) and case.body.get("channel") == "webhook":
        case.body["url"] = WEBHOOK_URL


def _runs(case: Case) -> None:
    """A filter is the JSON array ``[column, op, value]`` with a value its column and operator take,
    and a cursor pages only the newest-first list (runs.columns, runs.queries.list_runs)."""
    from runcast_server.core.errors import Invalid
    from runcast_server.runs.columns import parse_filter

    query = case.query or {}
    filters = query.get("filter")
    if filters is not None:
        kept = []
        for f in filters if isinstance(filters, list) else [filters]:
            try:
                parse_filter(str(f))
                kept.append(f)
            except Invalid:
                pass
        query["filter"] = kept
    if query.get("sort") is not None or query.get("group_by") is not None:
        query.pop("cursor", None)


def _integers(value: Any) -> Any:
    """Whole floats (``2.0``, which JSON Schema counts as an integer) written as integers: the SDK's
    checks, which the server runs on ingest, uploads and detector parameters, take ``2`` only."""
    if isinstance(value, float) and value.is_integer() and abs(value) <= 2**53:
        return int(value)
    if isinstance(value, dict):
        return {k: _integers(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_integers(v) for v in value]
    return value


def _report(case: Case) -> None:
    """``to_step`` is not below ``from_step``, and the body names no live block (``runcast-...``
    fences have rules of their own: reports/blocks.py)."""
    body = case.body if isinstance(case.body, dict) else {}
    if isinstance(body.get("from_step"), int) and isinstance(body.get("to_step"), int) \
            and body["to_step"] < body["from_step"]:
        body["from_step"], body["to_step"] = body["to_step"], body["from_step"]
    if isinstance(body.get("body"), str):
        body["body"] = body["body"].replace("runcast-", "runcast ")


def _draft(case: Case) -> None:
    query = case.query or {}
    if query.get("from_step") is not None and query.get("to_step") is not None \
            and int(query["to_step"]) < int(query["from_step"]):
        query["from_step"], query["to_step"] = query["to_step"], query["from_step"]


RULES: dict[str, Callable[[Case], None]] = {
    "POST /api/v1/runs/{run_id}/reports": _report,
    "PUT /api/v1/runs/{run_id}/reports/{number}": _report,
    "GET /api/v1/runs/{run_id}/report-draft": _draft,
    "GET /api/v1/estimate": _estimate,
    "GET /api/v1/runs": _runs,
    "GET /api/v1/runs/{run_id}/metrics": _range,
    "GET /api/v1/runs/{run_id}/plot.svg": _range,
    "GET /api/v1/runs/{run_id}/plot.png": _range,
    "POST /api/v1/runs/{run_id}/uploads": _upload,
    "GET /api/v1/runs/{run_id}/export": _export,
    "POST /api/v1/ingest": _ingest,
    "PUT /api/v1/runs/{run_id}/blobs/{sha256}": _blob,
    "POST /api/v1/subscriptions": _subscription,
}


def _keep_rules(case: Case) -> None:
    if case.meta is None or case.meta.generation.mode != GenerationMode.POSITIVE:
        return
    if isinstance(case.body, (dict, list)):
        case.body = _integers(case.body)
    rule = RULES.get(case.operation.label)
    if rule is not None:
        rule(case)


@schemathesis.hook
def map_case(context: HookContext, case: Case) -> Case:
    _keep_rules(case)
    return case


@schemathesis.hook
def before_call(context: HookContext, case: Case, kwargs: dict[str, Any]) -> None:
    """Again just before the call: in the stateful phase an API link fills parameters after
    ``map_case`` (a ``key`` of the runs list given to an evaluations export)."""
    _keep_rules(case)
