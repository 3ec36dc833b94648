"""Response models of the artifact API: checkpoints, uploads, code revisions, manifests, data mix.

They describe the answers as the handlers build them (``extra="forbid"``: a key the code
returns but a model lacks fails validation). Recorded values (metrics, weights, manifests,
configs) keep the trainer's shape and are typed ``Any``; non-finite numbers in them are
the strings "NaN", "Infinity", "-Infinity".
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from runcast_server.artifacts.checkpoints import Status
from runcast_server.outputs.schemas import EvalEntry


class _Answer(BaseModel):
    model_config = ConfigDict(extra="forbid")


class Checkpoint(_Answer):
    """One checkpoint of the list; a private one of another project shows only its step."""

    id: int
    step: int
    segment: int
    status: Status
    reason: str | None
    size: int | None
    sha256: str | None
    metrics: dict[str, Any]
    public: bool
    filename: str | None
    kind: Literal["file", "directory"] | None
    recorded_at: float
    pruned_at: float | None
    download_url: str | None
    card_url: str | None
    files_url: str | None = Field(description="The file list of a downloadable directory checkpoint.")
    evals: list[EvalEntry] = Field(description="Evaluation scores of this checkpoint: tied to its step, or "
                                   "logged at its step (as GET /runs/{id}/evals shows them).")


class CheckpointList(_Answer):
    """The run's checkpoints; empty with ``withheld`` true under a policy that withholds them."""

    checkpoints: list[Checkpoint]
    withheld: bool


class CheckpointFile(_Answer):
    """One file of a directory checkpoint."""

    path: str
    size: int
    sha256: str | None = Field(description="null when not verified.")
    download_url: str


class CheckpointFiles(_Answer):
    """The files of a directory checkpoint."""

    files: list[CheckpointFile]


class CardRun(_Answer):
    """The run a card belongs to."""

    id: str
    name: str
    project: str


class CardCheckpoint(_Answer):
    """The checkpoint a card describes."""

    id: int
    step: int
    filename: str | None
    size: int | None
    sha256: str | None
    metrics: dict[str, Any]
    status: Status
    download_url: str | None


class CardLineageWindow(_Answer):
    """The steps one segment contributed to the checkpoint's lineage."""

    segment: int
    from_step: int
    to_step: int | None


class CardSegment(_Answer):
    """The segment that wrote the checkpoint and the segments it resumed from."""

    index: int
    start_step: int
    resumed: bool
    lineage: list[CardLineageWindow]


class CardCode(_Answer):
    """The code revision in force when the checkpoint was written."""

    revision: int
    sha: str | None
    branch: str | None
    remote: str | None
    dirty: bool
    diff_truncated: bool
    diff_url: str | None
    link: str | None


class CardManifest(_Answer):
    """The dataset manifest in force."""

    version: str
    step: int | None
    segment: int
    url: str | None


class CardDataMix(_Answer):
    """The data-mix weights in force."""

    step: int | None
    segment: int
    weights: dict[str, Any]


class CardDataPosition(_Answer):
    """How far through the data the run was (a tokens counter logged near the checkpoint's step)."""

    key: str
    step: int
    tokens: Any
    exact: bool


class CardParent(_Answer):
    """The checkpoint the run resumed from before writing this one."""

    id: int
    step: int
    segment: int
    sha256: str | None


class CheckpointCard(_Answer):
    """A checkpoint's reproducibility card (what ``GET .../card`` answers)."""

    card_version: int
    generated_at: float
    run: CardRun
    checkpoint: CardCheckpoint
    segment: CardSegment | None
    code: CardCode | None
    config: dict[str, Any]
    packages: dict[str, Any]
    seed: Any
    manifest: CardManifest | None
    data_mix: CardDataMix | None
    data_position: CardDataPosition | None
    parent_checkpoint: CardParent | None
    evals: list[EvalEntry] = Field(description="The checkpoint's evaluation scores (as the checkpoint list's).")


class StorageCapabilities(_Answer):
    """What a trainer needs to publish checkpoints."""

    uploads: bool
    backend: Literal["s3", "local"]
    chunk_bytes: int
    max_bytes: int
    max_files: int


class UploadPart(_Answer):
    """A presigned URL for one missing part (S3)."""

    number: int
    url: str


class UploadFileState(_Answer):
    """One file of an open upload: bytes held, and with S3 the parts still to send."""

    index: int
    path: str
    size: int
    part_bytes: int | None = Field(None, description="S3 only.")
    received: int
    parts: list[UploadPart] | None = Field(None, description="S3 only: where to PUT the missing parts.")


class UploadState(_Answer):
    """Where an upload stands (begin's answer); ``files`` lists an open upload's files only."""

    id: str
    state: str = Field(description="open, done or failed.")
    mode: Literal["upload", "in_place"]
    kind: Literal["file", "directory"]
    size: int
    chunk_bytes: int
    files: list[UploadFileState]
    path: str | None = Field(description="Where the checkpoint is stored; null for one found in place.")


class ChunkReceived(_Answer):
    """The bytes of the file now held."""

    index: int
    received: int


class UploadDone(_Answer):
    """A completed upload: verified, in place, its checkpoint event recorded."""

    id: str
    state: Literal["done"]
    path: str
    size: int


class Revision(_Answer):
    """One code state the run trained with."""

    id: int
    sha: str | None
    short_sha: str | None
    branch: str | None
    remote: str | None
    dirty: bool
    diff_bytes: int
    diff_sha256: str | None
    diff_truncated: bool
    diff_url: str | None
    link: str | None
    segments: list[int]
    start_steps: list[int]
    recorded_at: float


class RevisionChange(_Answer):
    """The code changed between two segments."""

    segment: int
    step: int
    from_: int = Field(alias="from")
    to: int


class RevisionList(_Answer):
    """The run's code revisions and the changes between segments."""

    revisions: list[Revision]
    changes: list[RevisionChange]


class SeenAt(_Answer):
    """A place the run recorded a manifest version."""

    segment: int
    step: int | None


class ManifestVersion(_Answer):
    """One manifest version: its newest event and where each was recorded."""

    version: Any
    id: int
    segment: int
    step: int | None
    recorded_at: float
    sources: list[Any]
    files: int
    tokens: Any
    seen_at: list[SeenAt]


class ManifestList(_Answer):
    """Every manifest version, in order."""

    manifests: list[ManifestVersion]


class Manifest(_Answer):
    """One manifest version as recorded (scrubbed)."""

    version: Any
    id: int
    segment: int
    step: int | None
    recorded_at: float
    scrubbed: dict[str, int] = Field(description="Credentials removed, by kind.")
    manifest: Any


class ManifestDiff(_Answer):
    """What changed between two manifest versions: ``files`` and ``sources`` (added, removed, changed),
    ``counts``, per-source ``tokens``, ``total_tokens`` and ``weights`` (each ``{from, to[, delta]}``)."""

    from_: Any = Field(alias="from")
    to: Any
    sources: dict[str, list[Any]]
    files: dict[str, list[Any]]
    counts: dict[str, int]
    tokens: dict[str, Any]
    total_tokens: dict[str, Any]
    weights: dict[str, Any]


class MixSegment(_Answer):
    """A segment of the run (the data-mix timeline's x axis)."""

    index: int
    start_step: int
    resumed: bool


class MixChange(_Answer):
    """One change of data-mix weights."""

    id: int
    segment: int
    step: int | None
    recorded_at: float
    weights: dict[str, Any]
    fractions: dict[str, Any] = Field(description="The weights normalised to sum 1 (null when they sum to 0).")


class DataMix(_Answer):
    """The data-mix timeline."""

    sources: list[str]
    segments: list[MixSegment]
    changes: list[MixChange]


class BlobStored(_Answer):
    """An image the run's project holds (``PUT /runs/{id}/blobs/{sha256}``): what the server found in it."""

    sha256: str
    size: int
    content_type: Literal["image/png", "image/jpeg"]
    width: int | None
    height: int | None
