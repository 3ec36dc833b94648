"""The reproducibility card of a checkpoint: one JSON document with what produced it.

Fields: the run, the checkpoint (step, size, sha256, metrics), its segment, the code
revision of that segment (with a link and the diff's URL, not the diff itself), the
config, package versions and seed the segment started with, the dataset manifest
version and data mix in force at the step (through the segment's lineage), the data
position (tokens seen at the step, from the first of ``TOKEN_KEYS`` that was logged),
the parent checkpoint: the newest earlier checkpoint of the segment's lineage, and its
evaluation scores (``outputs.evals.checkpoint_evals``, as the reader may see them).
"""

from __future__ import annotations

import time
from typing import Any
from urllib.parse import quote

from sqlalchemy import select
from sqlalchemy.orm import Session

from runcast_server.artifacts.checkpoints import CheckpointRecord, filename_for
from runcast_server.artifacts.lineage import SegmentRef, Window, in_lineage, lineage
from runcast_server.artifacts.manifests import ManifestEvent, MixEvent, in_force
from runcast_server.artifacts.revisions import Revision, code_link
from runcast_server.reads.published import published_config, published_remote
from runcast_server.reads.values import stored_value, strict_json
from runcast_server.record.models import Event, Point, Run, Series

CARD_VERSION = 1
TOKEN_KEYS = ("tokens_seen", "train/tokens_seen", "tokens", "train/tokens", "data/tokens_seen", "consumed_tokens")
PACKAGE_KEYS = ("python", "implementation", "torch", "deepspeed", "transformers", "numpy", "cuda", "world_size")


def _started(session: Session, segment: SegmentRef) -> dict[str, Any]:
    payload = session.scalar(
        select(Event.payload)
        .where(Event.segment_id == segment.id, Event.type == "run_started")
        .order_by(Event.id)
        .limit(1)
    )
    return dict(payload or {})


def data_position(session: Session, run_id: str, windows: list[Window], step: int) -> dict[str, Any] | None:
    """Tokens seen at ``step``: the newest point at or before it in the lineage, of the first key logged."""
    by_segment = {w.segment.id: w for w in windows}
    for key in TOKEN_KEYS:
        series = session.execute(
            select(Series.id, Series.segment_id).where(
                Series.run_id == run_id, Series.key == key, Series.segment_id.in_(list(by_segment))
            )
        ).all()
        if not series:
            continue
        best: tuple[int, int, Any] | None = None  # (step, -depth, value)
        for series_id, segment_id in series:
            w = by_segment[segment_id]
            row = session.execute(
                select(Point.step, Point.value)
                .where(Point.series_id == series_id, Point.step >= w.lo, Point.step <= min(w.hi, step))
                .order_by(Point.step.desc())
                .limit(1)
            ).first()
            if row is not None and (best is None or (row[0], -w.depth) > best[:2]):
                best = (row[0], -w.depth, row[1])
        if best is not None:
            return {"key": key, "step": best[0], "tokens": stored_value(best[2]), "exact": best[0] == step}
    return None


def build_card(
    session: Session,
    *,
    run: Run,
    project: str,
    record: CheckpointRecord,
    status: str,
    checkpoints: list[CheckpointRecord],
    segments: list[SegmentRef],
    revisions: list[Revision],
    manifests: list[ManifestEvent],
    mix: list[MixEvent],
    link_template: str,
    download_url: str | None,
    evals: list[dict[str, Any]],
    full: bool = False,
) -> dict[str, Any]:
    """The card (``full``: with path-like config values and a local remote, reads/published.py)."""
    windows = lineage(segments, record.segment)
    segment = next((s for s in segments if s.index == record.segment), None)
    started = _started(session, segment) if segment is not None else {}
    revision = next((r for r in revisions if record.segment in r.segments), None)
    manifest = in_force(manifests, segments, record.segment, record.step)
    weights = in_force(mix, segments, record.segment, record.step)
    earlier = [
        c
        for c in checkpoints
        if c.id != record.id and c.step < record.step and in_lineage(windows, c.segment, c.step) is not None
    ]
    parent = max(earlier, key=lambda c: (c.step, c.segment)) if earlier else None
    env = started.get("env") or {}
    base = f"/api/v1/runs/{run.id}"
    return strict_json(
        {
            "card_version": CARD_VERSION,
            "generated_at": time.time(),
            "run": {"id": run.id, "name": run.name, "project": project},
            "checkpoint": {
                "id": record.id,
                "step": record.step,
                "filename": filename_for(record, None),
                "size": record.size,
                "sha256": record.sha256,
                "metrics": record.metrics,
                "status": status,
                "download_url": download_url,
            },
            "segment": None
            if segment is None
            else {
                "index": segment.index,
                "start_step": segment.start_step,
                "resumed": segment.resumed,
                "lineage": [
                    {"segment": w.segment.index, "from_step": w.lo, "to_step": None if w.depth == 0 else w.hi}
                    for w in windows
                ],
            },
            "code": None
            if revision is None
            else {
                "revision": revision.id,
                "sha": revision.sha,
                "branch": revision.branch,
                "remote": published_remote(revision.remote, full),
                "dirty": revision.dirty,
                "diff_truncated": revision.diff_truncated,
                "diff_url": f"{base}/revisions/{revision.id}/diff" if revision.diff else None,
                "link": code_link(link_template, revision),
            },
            "config": published_config(strict_json(started.get("config") or {}), full),
            "packages": {k: env[k] for k in PACKAGE_KEYS if env.get(k) is not None},
            "seed": started.get("seed"),
            "manifest": None
            if manifest is None
            else {
                "version": manifest.version,
                "step": manifest.step,
                "segment": manifest.segment,
                "url": f"{base}/manifests/{quote(manifest.version, safe='')}",
            },
            "data_mix": None if weights is None else {"step": weights.step, "segment": weights.segment, "weights": weights.weights},
            "data_position": data_position(session, run.id, windows, record.step),
            "parent_checkpoint": None
            if parent is None
            else {"id": parent.id, "step": parent.step, "segment": parent.segment, "sha256": parent.sha256},
            "evals": evals,
        }
    )
