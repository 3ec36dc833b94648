"""W&B: offline runs written by the real ``wandb`` package (WANDB_MODE=offline, no network), and chart CSVs."""

from __future__ import annotations

import math
import shutil
import time

import pytest
from runcast import importers


def test_offline_runs(hub, wandb_dir):
    started = time.time()
    plans = hub.load([wandb_dir])

    assert sorted(p.name for p in plans) == ["baseline", "resumed"]
    base = next(p for p in plans if p.name == "baseline")
    run = hub.run(base.run_id)
    assert run["config"] == {"lr": 1e-3, "model": {"layers": 4}, "batch_size": 32}
    # tags are the run's (the runs list finds them); one with a comma cannot be a tag and stays in env
    assert run["tags"] == ["fp32", "sweep-a"] and run["env"]["tags"] == ["lr=1e-3,bs=32"]
    found = hub.client.get("/api/v1/runs", params={"tag": "sweep-a"}, headers=hub.auth()).json()["runs"]
    assert [r["id"] for r in found] == [base.run_id]
    assert run["env"]["imported_from"]["format"] == "wandb" and run["env"]["imported_from"]["project"] == "pretrain"
    assert run["status"] == "finished"
    assert run["notes"] == "first try" and hub.events(base.run_id, "note") == []
    # W&B's summary (the last value of each metric, and what the script set), without its "_" keys
    assert run["summary"] == {"best/val": 2.41, "final": {"acc": 0.9}, "label": "ok", "train/loss": 3.0 / 100,
                              "lr": 1e-3, "nested.depth": 99, "val/loss": 2.5 - 90 / 1000, "spike": "NaN",
                              "blowup": "Infinity", "comment": "text is left out"}
    stored = hub.points(base.run_id)
    assert stored[(0, "train/loss")] == [(s, 3.0 / (1 + s)) for s in range(100)]
    assert stored[(0, "val/loss")] == [(s, 2.5 - s / 1000) for s in range(0, 100, 10)]
    assert stored[(0, "nested.depth")] == [(s, float(s)) for s in range(100)]
    assert math.isnan(stored[(0, "spike")][0][1]) and stored[(0, "blowup")] == [(50, math.inf)]
    assert not any(key.startswith("_") or key == "comment" for _, key in stored)
    # W&B's _timestamp column: the steps' times on the server, never a metric of that name (nor a
    # time/elapsed_s metric: the time axes and exports read the server's step times)
    times = hub.times(base.run_id)
    steps = [times[(0, s)] for s in range(100)]
    assert steps[0] == pytest.approx(run["started_at"]) and steps == sorted(steps)
    # Each step's time is W&B's own, to the 0.1 s of the server's thinning (docs/dashboard.md, "Step times")
    source = base.run.segments[0].series["train/loss"]
    wandb_times = dict(zip(source.steps, source.times))
    assert all(wandb_times[s] - 0.1 <= times[(0, s)] <= wandb_times[s] for s in range(100))
    assert "_timestamp" not in run["keys"] and "time/elapsed_s" not in run["keys"]
    assert started - 3600 < run["started_at"] < started


def test_a_resumed_offline_run_is_one_run_with_two_segments(hub, wandb_dir):
    plans = hub.load([wandb_dir])
    resumed = next(p for p in plans if p.name == "resumed")
    run = hub.run(resumed.run_id)
    assert [(s["index"], s["start_step"]) for s in run["segments"]] == [(0, 0), (1, 4)]
    stored = hub.points(resumed.run_id)
    assert stored[(0, "loss")] == [(s, 1 - s / 100) for s in range(10)]
    assert stored[(1, "loss")] == [(s, 0.5 - s / 100) for s in range(5, 15)]
    assert run["status"] == "finished"  # the last part exited 0; the first part's exit 1 ends its segment


def test_one_run_directory_and_one_log_file(hub, wandb_dir):
    run_dir = next(d for d in sorted(wandb_dir.glob("offline-run-*")) if "resumed01" not in d.name)
    (from_dir,) = hub.load([run_dir])
    (from_file,) = hub.load([next(run_dir.glob("*.wandb"))])
    assert from_dir.run_id == from_file.run_id and from_dir.name == "baseline"


def test_a_damaged_log_is_refused(hub, wandb_dir, tmp_path):
    run_dir = next(d for d in sorted(wandb_dir.glob("offline-run-*")) if "resumed01" not in d.name)
    bad = tmp_path / "wandb" / run_dir.name
    shutil.copytree(run_dir, bad)
    log = next(bad.glob("*.wandb"))
    data = log.read_bytes()
    log.write_bytes(data[:1500] + b"\xff" * 20 + data[1520:])  # W&B's reader skips the rest of the block
    with pytest.raises(importers.ImportFailed) as caught:
        hub.load([tmp_path / "wandb"])
    assert str(caught.value).startswith(f"{log}: W&B's reader: ") and "corrupt" in str(caught.value)
    assert hub.runs() == []


CHART_CSV = (
    '"Step","baseline - train/loss","baseline - train/loss__MIN","baseline - train/loss__MAX",'
    '"wide-2 - train/loss","wide-2 - train/loss__MIN","wide-2 - train/loss__MAX"\n'
    '0,3.1,3.1,3.1,3.3,3.3,3.3\n'
    '10,2.5,2.4,2.6,,,\n'
    '20,2.25,2.2,2.3,2.9,2.8,3\n'
)


def test_chart_csv(hub, tmp_path):
    path = tmp_path / "wandb_export_2026-12-03.csv"
    path.write_text(CHART_CSV)
    plans = hub.load([path])
    assert [p.name for p in plans] == ["baseline", "wide-2"]
    assert hub.points(plans[0].run_id) == {(0, "train/loss"): [(0, 3.1), (10, 2.5), (20, 2.25)]}
    assert hub.points(plans[1].run_id) == {(0, "train/loss"): [(0, 3.3), (20, 2.9)]}
    # the CSV of another chart of the same runs fills the same runs
    other = tmp_path / "lr.csv"
    other.write_text('"Step","baseline - lr","baseline - lr__MIN","baseline - lr__MAX"\n0,0.001,0.001,0.001\n')
    (again,) = hub.load([other])
    assert again.run_id == plans[0].run_id
    assert sorted(hub.points(plans[0].run_id)) == [(0, "lr"), (0, "train/loss")]


def test_chart_csv_with_a_bad_cell_names_line_and_column(hub, tmp_path):
    path = tmp_path / "chart.csv"
    path.write_text(CHART_CSV.replace("2.25,", "2.2x5,"))
    with pytest.raises(importers.ImportFailed, match=r"chart\.csv:4: column 'baseline - train/loss': '2\.2x5' is not a number"):
        hub.load([path])
    assert hub.runs() == []


def test_a_log_cut_short_is_a_crashed_run(hub, wandb_dir, tmp_path):
    run_dir = next(d for d in sorted(wandb_dir.glob("offline-run-*")) if "resumed01" not in d.name)
    crashed = tmp_path / "wandb" / run_dir.name
    shutil.copytree(run_dir, crashed)
    log = next(crashed.glob("*.wandb"))
    log.write_bytes(log.read_bytes()[: log.stat().st_size * 2 // 3])
    (plan,) = hub.load([tmp_path / "wandb"])
    run = hub.run(plan.run_id)
    assert run["status"] == "failed"
    steps = [s for s, _ in hub.points(plan.run_id)[(0, "train/loss")]]
    assert 0 < len(steps) < 100 and steps == list(range(len(steps)))
