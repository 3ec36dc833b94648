"""What the reference model says and scores at each checkpoint, broadcast beside its loss.

At every checkpoint the trainer logs (docs/samples.md):

* samples: a continuation of each of ``PROMPTS`` (``sample_tokens`` bytes, sampled at
  ``TEMPERATURE`` from the ``TOP_K`` likeliest bytes with a generator seeded per prompt, so the
  same weights always say the same; the tokenizer is byte level, so a continuation is decoded
  as UTF-8 with invalid bytes replaced, and stops at the end-of-document token);
* an evaluation tied to the checkpoint: per data source, the validation loss and its bits per
  byte (suite ``runcast-train``);
* the distribution of the token embedding's weights (a histogram, key ``weights/tok_emb``).
"""

from __future__ import annotations

import math
from typing import Any, cast

import torch

from runcast.media import Histogram
from runcast.train.data import EOD

# Prompts the two sources (code and prose) start lines with; the SDK names each by its hash.
PROMPTS = ("def ", "import ", "class ", "The ")
SUITE = "runcast-train"
TEMPERATURE = 0.8
TOP_K = 20


@torch.no_grad()
def continuation(net: torch.nn.Module, prompt: str, new_tokens: int, block_size: int, seed: int) -> str:
    """A continuation of ``prompt`` by ``net``, at most ``new_tokens`` bytes, as text (``seed``: the sampler's)."""
    device = next(net.parameters()).device
    generator = torch.Generator().manual_seed(seed)
    idx = torch.tensor([list(prompt.encode())], dtype=torch.long, device=device)
    out: list[int] = []
    for _ in range(new_tokens):
        logits, _ = net(idx[:, -block_size:])
        top = torch.topk(logits[0, -1].float().cpu() / TEMPERATURE, TOP_K)
        token = int(top.indices[torch.multinomial(torch.softmax(top.values, dim=-1), 1, generator=generator)])
        if token == EOD:
            break
        out.append(token)
        idx = torch.cat([idx, torch.tensor([[token]], dtype=torch.long, device=device)], dim=1)
    return bytes(out).decode("utf-8", errors="replace")


def log_checkpoint_outputs(run: Any, net: torch.nn.Module, step: int, val: dict[str, float], new_tokens: int,
                           block_size: int, seed: int, whole_weights: bool = True) -> None:
    """Log the samples, the evaluation and the embedding histogram of the checkpoint at ``step``.
    ``whole_weights`` False (ZeRO-3: this rank holds a shard) leaves out what needs the weights."""
    if new_tokens > 0 and whole_weights:
        was_training = net.training
        net.eval()
        settings = {"temperature": TEMPERATURE, "top_k": TOP_K, "max_new_tokens": new_tokens}
        rows = [{"prompt": prompt, "output": continuation(net, prompt, new_tokens, block_size, seed + i),
                 "settings": {**settings, "seed": seed + i}} for i, prompt in enumerate(PROMPTS)]
        net.train(was_training)
        run.log_samples(rows, step=step)
    sources = {key.removeprefix("val/loss_"): loss for key, loss in val.items() if key.startswith("val/loss_")}
    if sources:
        run.log_eval({f"val_{source}": {"loss": loss, "bits_per_byte": loss / math.log(2)}
                      for source, loss in sources.items()}, step=step, suite=SUITE, checkpoint=step)
    if whole_weights:
        embedding = cast(torch.nn.Embedding, net.get_submodule("tok_emb"))
        run.log_media("weights/tok_emb", Histogram(embedding.weight.detach()), step=step)
