"""``runcast estimate``: GPU memory per device for a model under ZeRO, following the ZeRO paper.

Model states (Rajbhandari et al., "ZeRO: Memory Optimizations Toward Training Trillion
Parameter Models", 2020, section 5): mixed-precision Adam keeps, for Ψ parameters,
2Ψ bytes of fp16 weights, 2Ψ of fp16 gradients and KΨ of optimizer states (K = 12:
fp32 master weights, momentum and variance). Over N data-parallel devices:

===========  =====================================
stage        bytes per device
===========  =====================================
0 (DDP)      2Ψ + 2Ψ + KΨ
1 (P_os)     2Ψ + 2Ψ + KΨ/N
2 (P_os+g)   2Ψ + (2Ψ + KΨ)/N
3 (P_os+g+p) (2Ψ + 2Ψ + KΨ)/N
===========  =====================================

With ``--offload-optimizer`` (ZeRO-Offload, stages 1-3) the KΨ/N of optimizer states
live in CPU memory instead (shown as CPU memory per device).

Activations (Korthikanti et al., "Reducing Activation Recomputation in Large Transformer
Models", 2022, eq. 2; 16-bit activations, no tensor or sequence parallelism):
``L · s·b·h · (34 + 5·a·s/h)`` bytes for L layers, sequence length s, micro-batch b,
hidden size h and a attention heads; with full activation checkpointing only each
layer's input is kept: ``2·s·b·h·L``. Without --layers/--hidden the shape is assumed
from Ψ ≈ 12·L·h² with h = 128·L (GPT-3's aspect ratio). Buffers, fragmentation and
the CUDA context are not counted. GB here is 10^9 bytes, as in the paper.
"""

from __future__ import annotations

import json
import math
from typing import Any, Optional

import typer

GB = 1e9


def model_states(params: float, gpus: int, stage: int, offload_optimizer: bool = False, k: float = 12.0) -> dict[str, float]:
    """Bytes per device for weights, gradients and optimizer states (and the CPU share when offloaded)."""
    if stage not in (0, 1, 2, 3):
        raise ValueError("ZeRO stage must be 0, 1, 2 or 3")
    if gpus < 1 or params <= 0:
        raise ValueError("need at least one GPU and a positive parameter count")
    if offload_optimizer and stage == 0:
        raise ValueError("optimizer offload needs ZeRO stage 1, 2 or 3")
    weights = 2 * params / (gpus if stage >= 3 else 1)
    gradients = 2 * params / (gpus if stage >= 2 else 1)
    optimizer = k * params / (gpus if stage >= 1 else 1)
    out = {"weights": weights, "gradients": gradients, "optimizer": optimizer, "cpu_optimizer": 0.0}
    if offload_optimizer:
        out["cpu_optimizer"], out["optimizer"] = optimizer, 0.0
    out["total"] = weights + gradients + out["optimizer"]
    return out


def model_shape(params: float) -> tuple[int, int]:
    """(layers, hidden) for Ψ ≈ 12·L·h² with h = 128·L."""
    layers = max(1, round((params / (12 * 128**2)) ** (1 / 3)))
    hidden = 128 * layers
    return layers, hidden


def activations(layers: int, hidden: int, heads: int, seq_len: int, micro_batch: int, checkpointing: bool = False) -> float:
    """Activation bytes per device for one micro-batch (formula in the module docstring)."""
    sbh = seq_len * micro_batch * hidden
    if checkpointing:
        return 2.0 * sbh * layers
    return layers * sbh * (34 + 5 * heads * seq_len / hidden)


def estimate(params: float, gpus: int, stage: int, offload_optimizer: bool = False, *, layers: int | None = None,
             hidden: int | None = None, heads: int | None = None, seq_len: int = 2048, micro_batch: int = 1,
             checkpointing: bool = False) -> dict[str, Any]:
    states = model_states(params, gpus, stage, offload_optimizer)
    assumed = layers is None or hidden is None
    if assumed:
        layers, hidden = model_shape(params)
    heads = heads or max(1, hidden // 128)
    act = activations(layers, hidden, heads, seq_len, micro_batch, checkpointing)
    return {
        "params": params, "gpus": gpus, "zero_stage": stage, "offload_optimizer": offload_optimizer,
        "bytes": {**states, "activations": act, "gpu_total": states["total"] + act},
        "shape": {"layers": layers, "hidden": hidden, "heads": heads, "seq_len": seq_len,
                  "micro_batch": micro_batch, "assumed": assumed, "activation_checkpointing": checkpointing},
    }


def _fmt(b: float) -> str:
    return f"{b / GB:,.1f} GB" if b >= 0.05 * GB or b == 0 else f"{b / 1e6:,.1f} MB"


def estimate_command(
    params: float = typer.Option(..., help="Parameter count Ψ, e.g. 7e9."),
    gpus: int = typer.Option(1, min=1, help="Data-parallel devices N."),
    zero: int = typer.Option(0, min=0, max=3, help="ZeRO stage: 0 (plain data parallel), 1, 2 or 3."),
    offload_optimizer: bool = typer.Option(False, help="ZeRO-Offload: optimizer states in CPU memory."),
    layers: Optional[int] = typer.Option(None, min=1, help="Transformer layers (default: assumed from Ψ)."),
    hidden: Optional[int] = typer.Option(None, min=1, help="Hidden size (default: assumed from Ψ)."),
    heads: Optional[int] = typer.Option(None, min=1, help="Attention heads (default: hidden / 128)."),
    seq_len: int = typer.Option(2048, min=1, help="Sequence length."),
    micro_batch: int = typer.Option(1, min=1, help="Micro-batch per device."),
    checkpoint_activations: bool = typer.Option(False, help="Full activation checkpointing."),
    as_json: bool = typer.Option(False, "--json", help="Print JSON (bytes) instead of a table."),
) -> None:
    """Memory per GPU for weights, gradients and Adam states under ZeRO (ZeRO paper accounting), plus activations."""
    try:
        result = estimate(params, gpus, zero, offload_optimizer, layers=layers, hidden=hidden, heads=heads,
                          seq_len=seq_len, micro_batch=micro_batch, checkpointing=checkpoint_activations)
    except ValueError as exc:
        raise typer.BadParameter(str(exc)) from exc
    if as_json:
        typer.echo(json.dumps(result, indent=2))
        return
    b, shape = result["bytes"], result["shape"]
    typer.echo(f"{params:.3g} parameters, {gpus} GPU(s), ZeRO stage {zero}"
               + (", optimizer offloaded to CPU" if offload_optimizer else ""))
    typer.echo(f"  weights (fp16)         {_fmt(b['weights']):>12}")
    typer.echo(f"  gradients (fp16)       {_fmt(b['gradients']):>12}")
    typer.echo(f"  optimizer states       {_fmt(b['optimizer']):>12}" + ("  (K=12: fp32 weights, momentum, variance)"))
    typer.echo(f"  model states per GPU   {_fmt(b['total']):>12}")
    if offload_optimizer:
        typer.echo(f"  CPU memory per GPU     {_fmt(b['cpu_optimizer']):>12}  (offloaded optimizer states)")
    how = "2·s·b·h·L (checkpointed)" if checkpoint_activations else "L·s·b·h·(34 + 5·a·s/h)"
    typer.echo(f"  activations            {_fmt(b['activations']):>12}  {how}, "
               f"L={shape['layers']} h={shape['hidden']} a={shape['heads']} s={seq_len} b={micro_batch}"
               + (" (shape assumed from Ψ)" if shape["assumed"] else ""))
    typer.echo(f"  total per GPU          {_fmt(b['gpu_total']):>12}  (no buffers, fragmentation or CUDA context)")
    if not math.isfinite(b["gpu_total"]):  # pragma: no cover - defensive
        raise typer.Exit(1)
