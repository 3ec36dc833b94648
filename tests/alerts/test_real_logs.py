"""The detectors with their default parameters on the real pretraining logs in data/real/,
scored as ``bench/alert_quality.py`` scores them (docs/alerts.md, "Quality"): every
documented loss spike and divergence is found, and no alert opens anywhere else."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[2]
MAX_FALSE_PER_10K_STEPS = 0.3  # the promise in docs/alerts.md


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


def test_no_false_alert_on_the_real_logs(scored: dict[str, Any]) -> None:
    assert {name: log["false_by_kind"] for name, log in scored.items()} == {name: {} for name in scored}
    steps = sum(log["steps"] for log in scored.values())
    rows = sum(log["rows"] for log in scored.values())
    assert (steps, rows) == (454_573, 76_030)
    assert sum(log["false_alerts"] for log in scored.values()) / steps * 1e4 <= MAX_FALSE_PER_10K_STEPS
