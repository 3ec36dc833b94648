"""Dataset manifests of a run (one version, the diff of two) and the data-mix timeline."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Query
from fastapi import Path as PathParam

from runcast_server.api.deps import SessionDep
from runcast_server.api.one_hop import Reading, RunReadDep
from runcast_server.api.read_deps import (
    RUN_ERRORS,
    FullViewDep,
    ReadableRunDep,
    ViewDep,
)
from runcast_server.artifacts.lineage import run_segments
from runcast_server.artifacts.manifests import (
    diff,
    in_force,
    latest_of_version,
    load_manifests,
    load_mix,
    mix_timeline,
    versions,
)
from runcast_server.artifacts.schemas import (
    DataMix,
    Manifest,
    ManifestDiff,
    ManifestList,
)
from runcast_server.core.errors import NotFound
from runcast_server.reads.published import published_manifest
from runcast_server.reads.values import strict_json

router = APIRouter(tags=["artifacts"])

Version = Annotated[str, Query(min_length=1, max_length=100)]


@router.get("/runs/{run_id}/manifests", response_model=ManifestList, responses=RUN_ERRORS)
def list_manifests(found: ReadableRunDep, session: SessionDep, full: FullViewDep, policy: ViewDep) -> dict[str, Any]:
    """Every manifest version the run recorded, in order: sources, file and token counts."""
    run, _ = found
    policy.require("manifest")
    manifests = load_manifests(session, run.id, run_segments(session, run.id), policy.horizon)
    return {"manifests": published_manifest(strict_json(versions(manifests)), full)[0]}  # version strings too


@router.get("/runs/{run_id}/manifests/diff", response_model=ManifestDiff, responses=RUN_ERRORS)
def get_manifest_diff(found: ReadableRunDep, session: SessionDep, full: FullViewDep, policy: ViewDep,
                  from_: Annotated[str, Query(alias="from", min_length=1, max_length=100)], to: Version) -> dict[str, Any]:
    """Files added / removed / changed, token counts and weights between two versions."""
    run, _ = found
    policy.require_previews()
    segments = run_segments(session, run.id)
    manifests = load_manifests(session, run.id, segments, policy.horizon)
    old, new = latest_of_version(manifests, from_), latest_of_version(manifests, to)
    if old is None:
        raise NotFound("manifest version", field="from")
    if new is None:
        raise NotFound("manifest version", field="to")
    mix = load_mix(session, run.id, policy.horizon)
    old_mix = in_force(mix, segments, old.segment, old.step)
    new_mix = in_force(mix, segments, new.segment, new.step)
    changed = diff(old, new, old_mix.weights if old_mix else None, new_mix.weights if new_mix else None)
    return published_manifest(changed, full)[0]


@router.get("/runs/{run_id}/manifests/{version:path}", response_model=Manifest, responses=RUN_ERRORS)
def get_manifest(
    found: ReadableRunDep, session: SessionDep, full: FullViewDep, policy: ViewDep,
    version: Annotated[str, PathParam(min_length=1, max_length=100)],
) -> dict[str, Any]:
    """One manifest version as recorded (the newest event of that version), every string scrubbed."""
    run, _ = found
    policy.require_previews()
    manifest = latest_of_version(load_manifests(session, run.id, run_segments(session, run.id), policy.horizon), version)
    if manifest is None:
        raise NotFound("manifest version", field="version")
    body, counts = published_manifest(strict_json(manifest.manifest), full)
    return {
        "version": published_manifest(manifest.version, full)[0],
        "id": manifest.id,
        "segment": manifest.segment,
        "step": manifest.step,
        "recorded_at": manifest.ts,
        "scrubbed": counts,
        "manifest": body,
    }


@router.get("/runs/{run_id}/data-mix", response_model=DataMix, responses=RUN_ERRORS)
async def get_data_mix(read: RunReadDep) -> dict[str, Any]:
    """The data-mix timeline: every change of weights, by segment and step."""
    def mix(r: Reading) -> dict[str, Any]:
        policy = r.view()
        policy.require("data_mix")
        return mix_timeline(load_mix(r.session, r.run.id, policy.horizon), run_segments(r.session, r.run.id))

    return await read(mix)
