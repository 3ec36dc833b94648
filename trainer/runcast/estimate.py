"""GPU memory per device for a model under ZeRO, following the ZeRO paper.

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

The one implementation behind ``runcast estimate`` and the server's ``GET /api/v1/estimate``
(the run page's memory panel). Standard library only.
"""

from __future__ import annotations

from typing import Any

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
    if layers is None or hidden is None:
        layers, hidden = model_shape(params)
    heads = heads or max(1, hidden // 128)
    act = activations(layers, hidden, heads, seq_len, micro_batch, checkpointing)
    return {
        "params": params, "gpus": gpus, "zero_stage": stage, "offload_optimizer": offload_optimizer,
        "bytes": {**states, "activations": act, "gpu_total": states["total"] + act},
        "shape": {"layers": layers, "hidden": hidden, "heads": heads, "seq_len": seq_len,
                  "micro_batch": micro_batch, "assumed": assumed, "activation_checkpointing": checkpointing},
    }
