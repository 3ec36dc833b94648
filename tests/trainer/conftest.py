"""Shared pieces for the trainer-side tests: a tiny config and a run that records its calls."""

from __future__ import annotations

import pytest


class RecordingRun:
    """Stands in for runcast.Run in unit tests: keeps every call in ``calls``."""

    id = "recorded-run-0001"

    def __init__(self) -> None:
        self.calls: list[tuple[str, tuple, dict]] = []

    def __getattr__(self, name: str):
        def record(*args, **kwargs):
            self.calls.append((name, args, kwargs))

        return record

    def of(self, name: str) -> list[tuple[tuple, dict]]:
        return [(a, k) for n, a, k in self.calls if n == name]


@pytest.fixture
def recording_run() -> RecordingRun:
    return RecordingRun()


@pytest.fixture
def tiny_cfg(tmp_path):
    from runcast.train import TrainConfig

    def make(**overrides):
        base = dict(
            out_dir=str(tmp_path / "out"), n_layer=1, n_head=2, n_embd=32, block_size=32, batch_size=4,
            data_limit=40, max_steps=12, warmup_steps=2, eval_interval=4, eval_iters=2, ckpt_interval=4,
            keep_last=1, keep_best=1,
        )
        base.update(overrides)
        return TrainConfig(**base)

    return make


# The SDK tests' real HTTP receiver (tests/unit/sdk_receiver.py), shared rather than copied.
import sys  # noqa: E402
from pathlib import Path  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "unit"))
from sdk_receiver import Receiver  # noqa: E402


@pytest.fixture
def receiver():
    r = Receiver().start()
    try:
        yield r
    finally:
        r.stop()
