"""Shared pieces for the trainer-side tests: a tiny config and a run that records its calls."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import httpx
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


def embedded_server(tmp_path_factory: pytest.TempPathFactory, project: str) -> Iterator[tuple[str, str, str, dict]]:
    """One embedded ``runcast serve`` for a module's tests: (url, token of ``project``, token of
    "other", env); a module's ``server`` fixture yields from it."""
    import services

    root = tmp_path_factory.mktemp(f"{project}-server")
    env = {"RUNCAST_DATA_DIR": str(root / "data")}
    mine, other = services.create_token(env, project), services.create_token(env, "other")
    proc, url = services.start_api(env, root / "api.log")
    try:
        yield url, mine, other, env
    finally:
        proc.stop()


@pytest.fixture(scope="session")
def start_embedded_server() -> Any:
    """``embedded_server``, for a module's ``server`` fixture (tests/trainer is no package to import from)."""
    return embedded_server


@pytest.fixture
def api(server: Any) -> Iterator[httpx.Client]:
    """The module's server's API (``/api/v1``) with its project's token."""
    url, token, _, _ = server
    with httpx.Client(base_url=f"{url}/api/v1", timeout=30, headers={"Authorization": f"Bearer {token}"}) as client:
        yield client
