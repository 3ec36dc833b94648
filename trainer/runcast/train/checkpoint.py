"""Checkpoint files and the retention rule "keep the last N and the best M by val loss".

A checkpoint is one ``torch.save`` file (a DeepSpeed checkpoint is a directory, see
``trainer.py``). It holds everything a resume needs to continue bit for bit: model and
optimizer state, the step, the training config, the run id of the broadcast, the
sampler state (the data position) and the python / numpy / torch random states.
``checkpoints.json`` in the output directory lists the checkpoints kept.
"""

from __future__ import annotations

import hashlib
import json
import os
import random
import shutil
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch

INDEX = "checkpoints.json"


def rng_state() -> dict[str, Any]:
    return {"python": random.getstate(), "numpy": np.random.get_state(), "torch": torch.get_rng_state()}


def set_rng_state(state: dict[str, Any]) -> None:
    random.setstate(state["python"])
    np.random.set_state(state["numpy"])
    torch.set_rng_state(state["torch"])


def file_sha256(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        while chunk := f.read(1 << 20):
            h.update(chunk)
    return h.hexdigest()


def save(path: Path, state: dict[str, Any]) -> tuple[int, str]:
    """Write atomically (temp file + rename); returns (size in bytes, sha256)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(path.suffix + ".tmp")
    torch.save(state, tmp)
    os.replace(tmp, path)
    return path.stat().st_size, file_sha256(path)


def load(path: str | Path) -> dict[str, Any]:
    # Our own files: they hold numpy RNG state and config dicts, so not weights_only.
    state: dict[str, Any] = torch.load(path, map_location="cpu", weights_only=False)
    return state


def dir_size(path: Path) -> int:
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file())


@dataclass
class Kept:
    step: int
    path: str
    val_loss: float
    size: int
    sha256: str | None


class Retention:
    """Keeps the last ``keep_last`` checkpoints and the ``keep_best`` with the lowest val loss."""

    def __init__(self, out_dir: Path, keep_last: int, keep_best: int) -> None:
        self.index = out_dir / INDEX
        self.keep_last, self.keep_best = keep_last, keep_best
        self.kept: list[Kept] = []
        if self.index.exists():
            self.kept = [Kept(**k) for k in json.loads(self.index.read_text())]

    def add(self, entry: Kept) -> list[Kept]:
        """Record a new checkpoint; delete and return the ones the rule no longer keeps."""
        # "Last" is by time of writing: after a resume from an earlier step, the newest
        # checkpoints are the resumed branch's. A file written again replaces its entry.
        self.kept = [k for k in self.kept if k.path != entry.path] + [entry]
        last = {k.path for k in self.kept[-self.keep_last :]} if self.keep_last else set()
        best = {k.path for k in sorted(self.kept, key=lambda k: (k.val_loss, -k.step))[: self.keep_best]}
        pruned = [k for k in self.kept if k.path not in last | best]
        self.kept = [k for k in self.kept if k.path in last | best]
        for k in pruned:
            p = Path(k.path)
            if p.is_dir():
                shutil.rmtree(p, ignore_errors=True)
            else:
                p.unlink(missing_ok=True)
        self.index.write_text(json.dumps([asdict(k) for k in self.kept], indent=1))
        return pruned
