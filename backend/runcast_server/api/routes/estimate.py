"""``GET /estimate``: GPU memory per device under ZeRO, the accounting of ``runcast estimate``
(:mod:`runcast.estimate`, one implementation for both). Public, no run needed: the run page
fills it from a run's config."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Query
from pydantic import BaseModel, ConfigDict
from runcast.estimate import estimate

from runcast_server.core.errors import ApiError, error_responses

router = APIRouter(tags=["tools"])


class EstimateBytes(BaseModel):
    """Bytes per device (``cpu_optimizer``: in CPU memory when the optimizer is offloaded)."""

    model_config = ConfigDict(extra="forbid")

    weights: float
    gradients: float
    optimizer: float
    cpu_optimizer: float
    total: float
    activations: float
    gpu_total: float


class EstimateShape(BaseModel):
    """The model shape the estimate used; ``assumed``: layers and hidden derived from Ψ."""

    model_config = ConfigDict(extra="forbid")

    layers: int
    hidden: int
    heads: int
    seq_len: int
    micro_batch: int
    assumed: bool
    activation_checkpointing: bool


class MemoryEstimate(BaseModel):
    """GPU memory per device under ZeRO (the document of ``runcast estimate --json``)."""

    model_config = ConfigDict(extra="forbid")

    params: float
    gpus: int
    zero_stage: int
    offload_optimizer: bool
    bytes: EstimateBytes
    shape: EstimateShape


@router.get("/estimate", response_model=MemoryEstimate, responses=error_responses(422))
def estimate_memory(
    params: Annotated[float, Query(gt=0, le=1e15, description="Parameter count Ψ, e.g. 7e9.")],
    gpus: Annotated[int, Query(ge=1, le=1_000_000, description="Data-parallel devices N.")] = 1,
    zero: Annotated[int, Query(ge=0, le=3, description="ZeRO stage: 0 (plain data parallel), 1, 2 or 3.")] = 0,
    offload_optimizer: Annotated[bool, Query(description="ZeRO-Offload: optimizer states in CPU memory (stage 1-3).")] = False,
    layers: Annotated[int | None, Query(ge=1, le=100_000, description="Transformer layers (default: assumed from Ψ).")] = None,
    hidden: Annotated[int | None, Query(ge=1, le=10_000_000, description="Hidden size (default: assumed from Ψ).")] = None,
    heads: Annotated[int | None, Query(ge=1, le=1_000_000, description="Attention heads (default: hidden / 128).")] = None,
    seq_len: Annotated[int, Query(ge=1, le=100_000_000, description="Sequence length.")] = 2048,
    micro_batch: Annotated[int, Query(ge=1, le=1_000_000, description="Micro-batch per device.")] = 1,
    checkpoint_activations: Annotated[bool, Query(description="Full activation checkpointing.")] = False,
) -> dict[str, Any]:
    """Bytes per device for weights, gradients and Adam states by ZeRO stage (ZeRO paper: 2Ψ + 2Ψ + 12Ψ,
    partitioned by stage), plus an activation estimate; the same document as ``runcast estimate --json``."""
    if offload_optimizer and zero == 0:
        raise ApiError(422, "optimizer offload needs ZeRO stage 1, 2 or 3", field="offload_optimizer")
    try:
        return estimate(params, gpus, zero, offload_optimizer, layers=layers, hidden=hidden, heads=heads,
                        seq_len=seq_len, micro_batch=micro_batch, checkpointing=checkpoint_activations)
    except ValueError as exc:  # pragma: no cover - the query checks above cover every case
        raise ApiError(422, str(exc), field="params") from None
