"""The detectors with their default parameters on the real pretraining logs in data/real/,
scored as ``bench/alert_quality.py`` scores them (docs/alerts.md, "Quality"): every
documented loss spike and divergence is found, and at most 0.3 alerts per 10,000 logged
rows (and per 10,000 steps covered) open anywhere else. About 5 s on the 2-core machine."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[2]
MAX_FALSE_PER_10K = 0.3  # the promise in docs/alerts.md, per 10,000 rows and per 10,000 steps


@pytest.fixture(scope="module")
def scored() -> dict[str, Any]:
    spec = importlib.util.spec_from_file_location("alert_quality", ROOT / "bench" / "alert_quality.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["alert_quality"] = module
    spec.loader.exec_module(module)
    return module.real(ROOT / "data" / "real")


def test_every_documented_spike_and_divergence_is_found(scored: dict[str, Any]) -> None:
    documented = [d for log in scored.values() for d in log["documented"]]
    assert len(documented) == 8
    assert [(d["run"], d["step"]) for d in documented if not d["found"]] == []
    observed = scored["pythia410m_seed4_loss"]["observations"]
    assert [o["found"] for o in observed] == [True]  # the loss explosion right after the resume at 122,001


def test_false_alerts_on_the_real_logs_stay_within_the_promise(scored: dict[str, Any]) -> None:
    steps = sum(log["steps"] for log in scored.values())
    rows = sum(log["rows"] for log in scored.values())
    assert len(scored) == 6 and rows >= 240_000  # every log of data/real/ was read
    false = sum(log["false_alerts"] for log in scored.values())
    assert false / rows * 1e4 <= MAX_FALSE_PER_10K
    assert false / steps * 1e4 <= MAX_FALSE_PER_10K


def test_one_batch_jumps_of_healthy_runs_raise_nothing(scored: dict[str, Any]) -> None:
    """The 11 modded-nanogpt speedruns jump on single batches (up to x1.4) and are back at once."""
    assert scored["modded_nanogpt_speedruns"]["false_by_kind"] == {}
