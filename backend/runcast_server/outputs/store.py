"""Storing a batch's ``sample``, ``eval`` and ``media`` events as rows (``ingest.store.store_batch`` calls it).

Each event is one row, stored once per (segment, seq) like a timeline event, with the batch's run
``version`` (the live stream and the broadcast delay) and the time the batch arrived. Values are
kept as the wire has them (a NaN score is the text ``"NaN"``): JSON columns hold no NaN.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Final

from runcast.wire.events import encode_event
from sqlalchemy import Connection, Table, select

from runcast_server.core.db import upsert
from runcast_server.outputs.models import Blob, Evaluation, Media, Sample
from runcast_server.runs.versions import RunChange

SAMPLES: Table = Sample.__table__
EVALS: Table = Evaluation.__table__
MEDIA: Table = Media.__table__
BLOBS: Table = Blob.__table__
# The table each event type is stored in.
TABLE_OF: Final[Mapping[str, Table]] = {"sample": SAMPLES, "eval": EVALS, "media": MEDIA}
_ENVELOPE: Final = frozenset({"v", "type", "run", "segment", "seq", "ts", "step"})
_MEDIA_COLUMNS: Final = frozenset({"key", "kind", "blob"})  # columns of their own; the rest is the payload


def _row(event: Mapping[str, Any]) -> dict[str, Any]:
    """The type's columns of one event (wire form)."""
    wire = encode_event(event)
    body = {k: v for k, v in wire.items() if k not in _ENVELOPE}
    if event["type"] == "sample":
        return {"key": body["key"], "prompt_id": body["prompt_id"], "prompt": body["prompt"], "output": body["output"],
                "reference": body.get("reference"), "scores": body.get("scores"), "settings": body.get("settings")}
    if event["type"] == "eval":
        return {"suite": body["suite"], "task": body["task"], "metrics": body["metrics"],
                "checkpoint": body.get("checkpoint"), "n": body.get("n"), "config": body.get("config"),
                "versions": body.get("versions")}
    return {"key": body["key"], "kind": body["kind"], "blob": body.get("blob"),
            "payload": {k: v for k, v in body.items() if k not in _MEDIA_COLUMNS}}


def write_outputs(
    conn: Connection,
    events: Sequence[dict[str, Any]],
    segments: Mapping[tuple[str, str], int],
    changes: Mapping[str, RunChange],
    now: float,
) -> int:
    """Insert the batch's sample, eval and media events once per (segment, seq); returns the rows
    really inserted. Each inserted row's id goes on its run's change (``RunChange.outputs``: the
    replay log), which makes the batch a new version of the run."""
    rows: dict[str, dict[tuple[int, int], dict[str, Any]]] = {}
    for e in events:
        if e["type"] not in TABLE_OF:
            continue
        seg = segments[(e["run"], e["segment"])]
        rows.setdefault(e["type"], {}).setdefault((seg, e["seq"]), {
            "run_id": e["run"], "segment_id": seg, "seq": e["seq"], "step": e["step"], "ts": e["ts"],
            "received_at": now, "version": changes[e["run"]].version, **_row(e),
        })
    inserted = 0
    for kind, by_key in sorted(rows.items()):
        table = TABLE_OF[kind]
        stmt = (upsert(conn, table).on_conflict_do_nothing(index_elements=["segment_id", "seq"])
                .returning(table.c.run_id, table.c.id))
        for run, row_id in conn.execute(stmt, [by_key[k] for k in sorted(by_key)]):
            change = changes[run]
            change.outputs.setdefault(table.name, []).append(row_id)
            change.changed = True
            inserted += 1
    return inserted


def missing_blob(conn: Connection, project_id: int, events: Sequence[dict[str, Any]]) -> tuple[int, str] | None:
    """``(index, blob)`` of the first image event whose blob the project does not hold (no ``blobs`` row;
    another project's blob is as absent); None when every one is held. Reads nothing for a batch
    without images."""
    wanted = [(i, e["blob"]) for i, e in enumerate(events) if e["type"] == "media" and e["kind"] == "image"]
    if not wanted:
        return None
    shas = sorted({sha for _, sha in wanted})
    held = set(conn.execute(
        select(BLOBS.c.sha256).where(BLOBS.c.project_id == project_id, BLOBS.c.sha256.in_(shas))
    ).scalars())
    return next(((i, sha) for i, sha in wanted if sha not in held), None)
