"""Dataset manifests (manifest events) and the data-mix timeline (data_mix events).

A manifest is free-form JSON; the diff understands these shapes (docs/artifacts.md):

* ``sources``: an object of name -> source, or a list of sources with a ``name``;
* files of a source (or of the manifest itself, source ``""``) under ``files`` or
  ``shards``: a list of objects (``name``/``path``/``file``, ``size``/``bytes``,
  ``sha256``/``hash``, ``tokens``) or a list of rows described by ``files_columns``
  (default ``["name", "size", "sha256"]``);
* tokens of a source: ``tokens``, else the sum of its ``*_tokens`` numbers, else the
  sum of its files' ``tokens``;
* weights: ``weights`` or ``mix`` at the top (source -> weight) or ``weight`` in a
  source; else the data_mix event in force at the manifest's step.

Every string of a manifest goes through the scrubber on the way out
(``runcast.wire.scrub.scrub_tree``), so a manifest sent by a client that did not scrub its
sample previews is still published scrubbed; ``scrubbed`` counts what was replaced.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from runcast.wire.scrub import scrub_tree
from sqlalchemy import select
from sqlalchemy.orm import Session

from runcast_server.artifacts.lineage import SegmentRef, lineage
from runcast_server.policy.delay import Horizon
from runcast_server.reads.values import strict_json
from runcast_server.record.models import Event, Segment


@dataclass
class ManifestEvent:
    id: int
    segment: int
    step: int
    version: str
    manifest: dict[str, Any]
    ts: float
    seq: int


@dataclass
class MixEvent:
    id: int
    segment: int
    step: int
    weights: dict[str, Any]
    ts: float
    seq: int


def _due(query: Any, horizon: Horizon | None) -> Any:
    """Only the events due to a delayed reader (policy/delay.py)."""
    return query if horizon is None else query.where(horizon.events_due())


def load_manifests(session: Session, run_id: str, segments: list[SegmentRef],
                   horizon: Horizon | None = None) -> list[ManifestEvent]:
    starts = {s.index: s.start_step for s in segments}
    rows = session.execute(_due(
        select(Event.id, Event.seq, Event.step, Event.ts, Event.payload, Segment.index)
        .join(Segment, Segment.id == Event.segment_id)
        .where(Event.run_id == run_id, Event.type == "manifest"), horizon)
        .order_by(Event.id)
    ).all()
    return [
        ManifestEvent(
            id=i,
            segment=seg,
            step=step if step is not None else starts.get(seg, 0),
            version=str((p or {}).get("version", "")),
            manifest=dict((p or {}).get("manifest") or {}),
            ts=ts,
            seq=seq,
        )
        for i, seq, step, ts, p, seg in rows
    ]


def load_mix(session: Session, run_id: str, horizon: Horizon | None = None) -> list[MixEvent]:
    rows = session.execute(_due(
        select(Event.id, Event.seq, Event.step, Event.ts, Event.payload, Segment.index)
        .join(Segment, Segment.id == Event.segment_id)
        .where(Event.run_id == run_id, Event.type == "data_mix"), horizon)
        .order_by(Segment.index, Event.step, Event.seq)
    ).all()
    return [
        MixEvent(id=i, segment=seg, step=step or 0, weights=dict((p or {}).get("weights") or {}), ts=ts, seq=seq)
        for i, seq, step, ts, p, seg in rows
    ]


def in_force(items: list[Any], segments: list[SegmentRef], segment: int, step: int) -> Any | None:
    """The newest item (with ``segment``, ``step``, ``seq``) in force at ``step`` of ``segment``'s lineage."""
    best, best_key = None, None
    for window in lineage(segments, segment):
        for item in items:
            if item.step <= step and window.covers(item.segment, item.step):
                key = (item.step, -window.depth, item.seq)
                if best_key is None or key > best_key:
                    best, best_key = item, key
    return best


def versions(manifests: list[ManifestEvent]) -> list[dict[str, Any]]:
    """One entry per version: where it first appeared and every (segment, step) it was sent at."""
    out: dict[str, dict[str, Any]] = {}
    for m in manifests:
        entry = out.get(m.version)
        if entry is None:
            shape = normalise(m.manifest)
            entry = out[m.version] = {
                "version": m.version,
                "id": m.id,
                "segment": m.segment,
                "step": m.step,
                "recorded_at": m.ts,
                "sources": sorted(shape["sources"]),
                "files": len(shape["files"]),
                "tokens": shape["total_tokens"],
                "seen_at": [],
            }
        entry["seen_at"].append({"segment": m.segment, "step": m.step})
    return list(out.values())


def latest_of_version(manifests: list[ManifestEvent], version: str) -> ManifestEvent | None:
    found = [m for m in manifests if m.version == version]
    return found[-1] if found else None


# --- normalising for the diff -----------------------------------------------------------

_NAME_KEYS = ("name", "path", "file", "shard", "id")
_SIZE_KEYS = ("size", "bytes", "size_bytes")
_HASH_KEYS = ("sha256", "hash", "digest", "checksum")


def _number(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        return None
    return value


def _first(entry: dict[str, Any], keys: tuple[str, ...]) -> Any:
    for key in keys:
        if key in entry:
            return entry[key]
    return None


def _files(container: dict[str, Any]) -> dict[str, dict[str, Any]]:
    raw = container.get("files", container.get("shards"))
    if not isinstance(raw, list):
        return {}
    columns = container.get("files_columns") or container.get("shards_columns") or ["name", "size", "sha256"]
    out: dict[str, dict[str, Any]] = {}
    for i, row in enumerate(raw):
        if isinstance(row, (list, tuple)) and isinstance(columns, list):
            row = dict(zip((str(c) for c in columns), row))
        if isinstance(row, str):
            row = {"name": row}
        if not isinstance(row, dict):
            continue
        name = _first(row, _NAME_KEYS)
        name = str(name) if name is not None else f"#{i}"
        out[name] = {
            "size": _number(_first(row, _SIZE_KEYS)),
            "sha256": _first(row, _HASH_KEYS),
            "tokens": _number(row.get("tokens")),
            **({"status": row["status"]} if "status" in row else {}),
        }
    return out


def _source_tokens(source: dict[str, Any], files: dict[str, dict[str, Any]]) -> float | None:
    if _number(source.get("tokens")) is not None:
        return source["tokens"]
    parts = [v for k, v in source.items() if k.endswith("_tokens") and _number(v) is not None]
    if parts:
        return sum(parts)
    file_tokens = [f["tokens"] for f in files.values() if f["tokens"] is not None]
    return sum(file_tokens) if file_tokens else None


def normalise(manifest: dict[str, Any]) -> dict[str, Any]:
    """``{"sources": {name: {"tokens", "weight"}}, "files": {"source/name": {...}}, "total_tokens", "weights"}``."""
    raw_sources = manifest.get("sources")
    sources: dict[str, dict[str, Any]] = {}
    if isinstance(raw_sources, dict):
        sources = {str(k): v for k, v in raw_sources.items() if isinstance(v, dict)}
    elif isinstance(raw_sources, list):
        for i, s in enumerate(raw_sources):
            if isinstance(s, dict):
                sources[str(s.get("name", f"#{i}"))] = s
    files: dict[str, dict[str, Any]] = {}
    out_sources: dict[str, dict[str, Any]] = {}
    for name, source in sources.items():
        source_files = _files(source)
        files.update({f"{name}/{f}": v for f, v in source_files.items()})
        out_sources[name] = {"tokens": _source_tokens(source, source_files), "weight": _number(source.get("weight"))}
    files.update({f: v for f, v in _files(manifest).items()})
    weights_raw = manifest.get("weights", manifest.get("mix"))
    weights: dict[str, float] = {}
    if isinstance(weights_raw, dict):
        weights = {str(k): v for k, v in weights_raw.items() if _number(v) is not None}
    else:
        weights = {k: v["weight"] for k, v in out_sources.items() if v["weight"] is not None}
    token_values = [s["tokens"] for s in out_sources.values() if s["tokens"] is not None]
    total = _number(manifest.get("tokens")) if _number(manifest.get("tokens")) is not None else (
        sum(token_values) if token_values else None
    )
    return {"sources": out_sources, "files": files, "total_tokens": total, "weights": weights}


def diff(old: ManifestEvent, new: ManifestEvent, old_mix: dict[str, Any] | None, new_mix: dict[str, Any] | None) -> dict[str, Any]:
    """Files added / removed / changed, token counts and weights between two manifest versions."""
    a, b = normalise(old.manifest), normalise(new.manifest)
    added = sorted(set(b["files"]) - set(a["files"]))
    removed = sorted(set(a["files"]) - set(b["files"]))
    changed = [
        {"file": f, "from": a["files"][f], "to": b["files"][f]}
        for f in sorted(set(a["files"]) & set(b["files"]))
        if a["files"][f] != b["files"][f]
    ]
    tokens = {}
    for source in sorted(set(a["sources"]) | set(b["sources"])):
        t0 = a["sources"].get(source, {}).get("tokens")
        t1 = b["sources"].get(source, {}).get("tokens")
        tokens[source] = {"from": t0, "to": t1, "delta": None if t0 is None or t1 is None else t1 - t0}
    w0 = a["weights"] or (old_mix or {})
    w1 = b["weights"] or (new_mix or {})
    weights = {
        s: {"from": w0.get(s), "to": w1.get(s)}
        for s in sorted(set(w0) | set(w1))
        if w0.get(s) != w1.get(s)
    }
    t0, t1 = a["total_tokens"], b["total_tokens"]
    out = {
        "from": old.version,
        "to": new.version,
        "sources": {
            "added": sorted(set(b["sources"]) - set(a["sources"])),
            "removed": sorted(set(a["sources"]) - set(b["sources"])),
        },
        "files": {"added": added, "removed": removed, "changed": changed},
        "counts": {"added": len(added), "removed": len(removed), "changed": len(changed)},
        "tokens": tokens,
        "total_tokens": {"from": t0, "to": t1, "delta": None if t0 is None or t1 is None else t1 - t0},
        "weights": weights,
    }
    scrubbed, _ = scrub_tree(strict_json(out))  # file and source names are published text too
    return scrubbed


def mix_timeline(mix: list[MixEvent], segments: list[SegmentRef]) -> dict[str, Any]:
    """Every data-mix change as data: raw weights and weights normalised to sum 1."""
    sources: set[str] = set()
    changes = []
    for m in mix:
        sources.update(m.weights)
        total = sum(v for v in m.weights.values() if isinstance(v, (int, float)) and math.isfinite(v))
        changes.append(
            {
                "id": m.id,
                "segment": m.segment,
                "step": m.step,
                "recorded_at": m.ts,
                "weights": strict_json(m.weights),
                "fractions": {k: (v / total if total else None) for k, v in m.weights.items()},
            }
        )
    return {
        "sources": sorted(sources),
        "segments": [{"index": s.index, "start_step": s.start_step, "resumed": s.resumed} for s in segments],
        "changes": changes,
    }
