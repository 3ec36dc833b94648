"""torchrun with 2 processes over gloo, using the plain-torch example: one run, points from rank 0 only."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from sdk_receiver import free_port

pytestmark = pytest.mark.slow
EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "plain_torch.py"


def test_two_process_ddp_broadcasts_one_run_from_rank_zero(receiver, tmp_path):
    torchrun = Path(sys.executable).with_name("torchrun")
    env = {**os.environ, "RUNCAST_SERVER": receiver.url, "RUNCAST_TOKEN": "t", "RUNCAST_SPOOL_DIR": str(tmp_path),
           "OMP_NUM_THREADS": "1"}
    res = subprocess.run(
        [str(torchrun), "--nproc_per_node", "2", "--master_addr", "127.0.0.1", "--master_port", str(free_port()),
         str(EXAMPLE), "--max-steps", "12"],
        env=env, capture_output=True, text=True, timeout=240,
    )
    assert res.returncode == 0, res.stdout + res.stderr
    started = receiver.of_type("run_started")
    assert len(started) == 1
    assert started[0]["env"].get("world_size") in (2, None)
    steps = [e["step"] for e in receiver.of_type("metrics")]
    assert steps == list(range(12))  # each step once: rank 1 sent nothing
    assert [e["status"] for e in receiver.of_type("finished")] == ["finished"]
    assert {e["run"] for e in receiver.events()} == {started[0]["run"]}
