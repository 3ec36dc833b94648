"""Generations for fixed prompts, as ``run.log_samples`` rows (the Hugging Face callback's ``sample_prompts``).

The model generates on the calling process only, one prompt at a time, in eval mode and
without gradients, and goes back to the mode it was in. Greedy by default: it draws no
random numbers, so the training's random state is untouched (sampling, ``do_sample=True``,
draws from torch's global generator). A model whose weights are sharded across processes
(DeepSpeed ZeRO-3, FSDP) cannot generate on one of them: ``sharded`` says so.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Final

DEFAULT_SETTINGS: Final = {"max_new_tokens": 64, "do_sample": False}


def sharded(model: Any, args: Any = None) -> bool:
    """Whether the model's weights are split across processes (ZeRO-3 parameters, FSDP)."""
    if getattr(args, "fsdp", None) or "FullyShardedDataParallel" in type(model).__name__:
        return True
    return any(hasattr(p, "ds_id") for p in model.parameters())


def generate_samples(model: Any, tokenizer: Any, prompts: Sequence[str], settings: Mapping[str, Any]) -> list[dict[str, Any]]:
    """One row per prompt: the prompt, the text the model added to it, and the generation settings."""
    import torch

    kwargs = dict(settings)
    if "pad_token_id" not in kwargs:
        kwargs["pad_token_id"] = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else tokenizer.eos_token_id
    training = model.training
    model.eval()
    rows = []
    try:
        with torch.no_grad():
            for prompt in prompts:
                inputs = tokenizer(prompt, return_tensors="pt").to(model.device)
                out = model.generate(**inputs, **kwargs)
                text = tokenizer.decode(out[0, inputs["input_ids"].shape[1] :], skip_special_tokens=True)
                rows.append({"prompt": prompt, "output": text, "settings": dict(settings)})
    finally:
        model.train(training)
    return rows
