"""What the reference model says and scores at each checkpoint, broadcast beside its loss.

At every checkpoint the trainer logs (docs/samples.md):

* samples: the greedy continuation of each of ``PROMPTS`` (``sample_tokens`` bytes; the
  tokenizer is byte level, so a continuation is decoded as UTF-8 with invalid bytes replaced
  and stops at the end-of-document token);
* an evaluation tied to the checkpoint: per data source, the validation loss and its bits per
  byte (suite ``runcast-train``);
* the distribution of the token embedding's weights (a histogram, key ``weights/tok_emb``).
"""

from __future__ import annotations

import math
from typing import Any

import torch

from runcast.media import Histogram
from runcast.train.data import EOD

# Byte-level prompts the two sources start documents with: code and prose.
PROMPTS = {"def": "def ", "import": "import ", "class": "class ", "prose": "The "}
SUITE = "runcast-train"


@torch.no_grad()
def continuation(net: torch.nn.Module, prompt: str, new_tokens: int, block_size: int) -> str:
    """The greedy continuation of ``prompt`` by ``net``, at most ``new_tokens`` bytes, as text."""
    device = next(net.parameters()).device
    idx = torch.tensor([list(prompt.encode())], dtype=torch.long, device=device)
    out: list[int] = []
    for _ in range(new_tokens):
        logits, _ = net(idx[:, -block_size:])
        token = int(logits[0, -1].argmax())
        if token == EOD:
            break
        out.append(token)
        idx = torch.cat([idx, torch.tensor([[token]], dtype=torch.long, device=device)], dim=1)
    return bytes(out).decode("utf-8", errors="replace")


def log_checkpoint_outputs(run: Any, net: torch.nn.Module, step: int, val: dict[str, float], new_tokens: int,
                           block_size: int, whole_weights: bool = True) -> None:
    """Log the samples, the evaluation and the embedding histogram of the checkpoint at ``step``.
    ``whole_weights`` False (ZeRO-3: this rank holds a shard) leaves out what needs the weights."""
    if new_tokens > 0 and whole_weights:
        was_training = net.training
        net.eval()
        rows = [{"prompt_id": pid, "prompt": prompt, "output": continuation(net, prompt, new_tokens, block_size),
                 "settings": {"decoding": "greedy", "max_new_tokens": new_tokens}}
                for pid, prompt in PROMPTS.items()]
        net.train(was_training)
        run.log_samples(rows, step=step)
    sources = {key.removeprefix("val/loss_"): loss for key, loss in val.items() if key.startswith("val/loss_")}
    if sources:
        run.log_eval({f"val_{source}": {"loss": loss, "bits_per_byte": loss / math.log(2)}
                      for source, loss in sources.items()}, step=step, suite=SUITE, checkpoint=step)
    if whole_weights:
        run.log_media("weights/tok_emb", Histogram(net.tok_emb.weight.detach()), step=step)
