"""Training logs (the seed JSONL format, CSV), real logs from data/real, bad files, interrupted imports."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import pytest
from runcast import importers

from importers.conftest import AppTransport

REAL = Path(__file__).resolve().parents[2] / "data" / "real"
T0 = 1_700_000_000.0


def seed_rows(n: int, *, iso: bool = False) -> list[dict]:
    rows = []
    for s in range(1, n + 1):
        ts = T0 + 2.5 * s
        rows.append({"step": s, "loss": 3.0 - s / 1000, "learning_rate": 3e-4, "grad_norm": 0.5 + s / 100,
                     "tokens_seen": 4096 * s,
                     "timestamp": f"2023-11-14T22:{13 + int(2.5 * s) // 60:02d}:{(20 + 2.5 * s) % 60:06.3f}Z" if iso else ts})
    return rows


def write_jsonl(path: Path, rows: list[dict]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def test_seed_format_keeps_values_names_and_times(hub, tmp_path):
    log = write_jsonl(tmp_path / "seed.jsonl", seed_rows(400))

    (plan,) = hub.load([log])

    run = hub.run(plan.run_id)
    assert run["name"] == "seed" and run["status"] == "finished"
    assert run["started_at"] == T0 + 2.5 and run["finished_at"] == T0 + 2.5 * 400
    stored = hub.points(plan.run_id)
    assert sorted(k for _, k in stored) == sorted(["train/loss", "lr", "grad_norm", "tokens_seen"])
    assert stored[(0, "train/loss")] == [(s, 3.0 - s / 1000) for s in range(1, 401)]
    assert stored[(0, "tokens_seen")] == [(s, 4096.0 * s) for s in range(1, 401)]
    times = hub.times(plan.run_id)  # the log's times: each step's time on the server
    assert [times[(0, s)] for s in range(1, 401)] == [T0 + 2.5 * s for s in range(1, 401)]
    assert plan.run.points == 1600


def test_iso_timestamps(hub, tmp_path):
    log = write_jsonl(tmp_path / "iso.jsonl", seed_rows(3, iso=True))
    (plan,) = hub.load([log])
    assert hub.run(plan.run_id)["started_at"] == 1_700_000_002.5  # 2023-11-14T22:13:22.500Z
    assert hub.times(plan.run_id) == {(0, 1): 1_700_000_002.5, (0, 2): 1_700_000_005.0, (0, 3): 1_700_000_007.5}


def test_pythia_restarts_and_documented_events(hub):
    (plan,) = hub.load([REAL / "pythia410m_seed4_loss.csv"])

    with open(REAL / "pythia410m_seed4_loss.csv") as f:
        rows = list(csv.DictReader(f))
    documented = json.loads((REAL / "pythia410m_seed4_loss.events.json").read_text())["events"]
    run = hub.run(plan.run_id)
    assert [(s["index"], s["start_step"]) for s in run["segments"]] == [
        (0, 0), (1, 7000), (2, 55000), (3, 104000), (4, 121000), (5, 122000), (6, 122000)]
    stored = hub.points(plan.run_id)
    assert sum(len(v) for v in stored.values()) == len(rows)
    assert len(hub.events(plan.run_id, "note")) == len(documented)
    assert [e["payload"]["status"] for e in hub.events(plan.run_id, "finished")] == ["killed"] * 6 + ["finished"]


def test_bad_lines_are_named_and_nothing_is_sent(hub, tmp_path):
    good = write_jsonl(tmp_path / "good.jsonl", seed_rows(50))
    rows = [json.dumps(r) for r in seed_rows(5)]
    rows[2] = rows[2][:-3]
    bad = tmp_path / "bad.jsonl"
    bad.write_text("\n".join(rows) + "\n")

    with pytest.raises(importers.ImportFailed, match=r"bad\.jsonl:3: not JSON"):
        hub.load([good, bad])
    assert hub.runs() == []

    no_step = write_jsonl(tmp_path / "nostep.jsonl", [{"loss": 1.0}])
    with pytest.raises(importers.ImportFailed, match=r"nostep\.jsonl:1: 'step' must be a whole number, got None"):
        hub.load([no_step])
    bad_time = write_jsonl(tmp_path / "time.jsonl", [{"step": 1, "loss": 1.0, "timestamp": "yesterday"}])
    with pytest.raises(importers.ImportFailed, match=r"time\.jsonl:1: 'timestamp' 'yesterday' is neither"):
        hub.load([bad_time])
    millis = write_jsonl(tmp_path / "millis.jsonl", [{"step": 1, "loss": 1.0, "timestamp": 1.7e12}])
    with pytest.raises(importers.ImportFailed, match=r"millis\.jsonl:1: time 1700000000000\.0 of 'train/loss' is not seconds"):
        hub.load([millis])
    assert hub.runs() == []


def test_zero_points_is_an_error(hub, tmp_path):
    header_only = tmp_path / "empty.csv"
    header_only.write_text("step,loss\n")
    with pytest.raises(importers.ImportFailed, match=r"empty\.csv: no metric points to import"):
        hub.load([header_only])
    no_numbers = tmp_path / "words.csv"
    no_numbers.write_text("step,comment\n1,hello\n")
    with pytest.raises(importers.ImportFailed, match="no metric points"):
        hub.load([no_numbers])


def test_an_interrupted_import_resumes_to_the_exact_points(hub, tmp_path):
    log = write_jsonl(tmp_path / "long.jsonl", seed_rows(3000))  # 3000 events: 4 batches of 1000, as columns
    flaky = AppTransport(hub.client, hub.token(), fail_after=2)
    with pytest.raises(importers.SendFailed, match="run the same command again to resume"):
        hub.load([log], transport=flaky, limits=importers.Limits(max_events=1000, columns=True))
    assert flaky.batches == 2 and all(b'"type":"metrics_columns"' in body for body in flaky.bodies[1:])
    (plan,) = importers.plan_all(importers.read_all([str(log)]), importers.Target(project="demo"))
    partial = hub.points(plan.run_id)
    assert 0 < sum(len(v) for v in partial.values()) < 3000 * 5

    hub.load([log])

    stored = hub.points(plan.run_id)
    assert {k: len(v) for k, v in stored.items()} == {(0, k): 3000 for k in
                                                      ("train/loss", "lr", "grad_norm", "tokens_seen")}
    assert hub.run(plan.run_id)["status"] == "finished"


def test_repeated_steps_are_kept_once_and_counted(hub, tmp_path):
    log = tmp_path / "repeats.csv"
    log.write_text("step,loss\n1,3.0\n2,2.9\n2,2.95\n3,2.8\n")
    (plan,) = hub.load([log])
    assert plan.run.repeats == 1
    assert hub.points(plan.run_id) == {(0, "train/loss"): [(1, 3.0), (2, 2.9), (3, 2.8)]}
