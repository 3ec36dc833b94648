"""``runcast estimate``: the ZeRO memory accounting of :mod:`runcast.estimate` as a command."""

from __future__ import annotations

import json
import math

import typer

from runcast.estimate import GB, activations, estimate, model_shape, model_states

__all__ = ["GB", "activations", "estimate", "estimate_command", "model_shape", "model_states"]


def _fmt(b: float) -> str:
    return f"{b / GB:,.1f} GB" if b >= 0.05 * GB or b == 0 else f"{b / 1e6:,.1f} MB"


def estimate_command(
    params: float = typer.Option(..., help="Parameter count Ψ, e.g. 7e9."),
    gpus: int = typer.Option(1, min=1, help="Data-parallel devices N."),
    zero: int = typer.Option(0, min=0, max=3, help="ZeRO stage: 0 (plain data parallel), 1, 2 or 3."),
    offload_optimizer: bool = typer.Option(False, help="ZeRO-Offload: optimizer states in CPU memory."),
    layers: int | None = typer.Option(None, min=1, help="Transformer layers (default: assumed from Ψ)."),
    hidden: int | None = typer.Option(None, min=1, help="Hidden size (default: assumed from Ψ)."),
    heads: int | None = typer.Option(None, min=1, help="Attention heads (default: hidden / 128)."),
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
