"""`runcast replay` on copies of real training logs (data/real) and on JSONL, against a real receiver (`runcast import`: tests/importers)."""

from __future__ import annotations

import csv
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from runcast.cli.replay import metrics_of, replay

REAL = Path(__file__).resolve().parents[2] / "data" / "real"


@pytest.fixture
def init(receiver, tmp_path):
    import runcast

    def make(**kwargs):
        return runcast.init(server=receiver.url, token="t", spool_dir=str(tmp_path / "spool"), capture_code=False,
                            **kwargs)

    return make


def quiet(*_):
    pass


def _segments(receiver):
    return [(e["run"], e["resume_step"], e["config"]["segment"]) for e in receiver.of_type("run_started")]


def test_pythia_restarts_become_segments_of_one_run(receiver, init):
    counts = replay(REAL / "pythia410m_seed4_loss.csv", init, log=quiet)
    with open(REAL / "pythia410m_seed4_loss.csv") as f:
        rows = list(csv.DictReader(f))
    documented = json.loads((REAL / "pythia410m_seed4_loss.events.json").read_text())["events"]
    assert counts == {"rows": len(rows), "skipped": 0, "runs": 1, "segments": 7, "notes": len(documented), "samples": 0}
    segments = _segments(receiver)
    assert len({run for run, _, _ in segments}) == 1
    assert [(step, seg) for _, step, seg in segments] == [
        (None, "nktat4z3"), (7000, "cn24vtl8"), (55000, "8cqlckny"), (104000, "mjr8166t"),
        (121000, "vj2l1j5m"), (122000, "zfe18b3d"), (122000, "3gnddce8"),
    ]
    metrics = receiver.of_type("metrics")
    assert len(metrics) == len(rows)
    assert metrics[0]["step"] == 1 and metrics[0]["values"] == {"train/loss": 11.077447891235352}
    # the documented blow-up after the last resume is in the stream, value for value
    last = [m for m in metrics if m["segment"] == metrics[-1]["segment"]]
    assert {m["step"]: m["values"]["train/loss"] for m in last}[122002] == 10.984621047973633
    assert [e["status"] for e in receiver.of_type("finished")] == ["killed"] * 6 + ["finished"]


def test_smollm3_resume_overlaps_steps(receiver, init):
    counts = replay(REAL / "smollm3_3b_48n_1004_loss.csv", init, log=quiet)
    assert counts == {"rows": 20000, "skipped": 0, "runs": 1, "segments": 2, "notes": 1, "samples": 0}
    segments = _segments(receiver)
    assert [(step, seg) for _, step, seg in segments] == [(None, "part1"), (134007, "resume1104-farsi-change")]
    first = receiver.of_type("metrics")[0]
    assert first["step"] == 4 and first["values"] == {"tokens_seen": 9437184.0, "train/loss": 12.174397468566895}
    notes = receiver.of_type("note")
    assert len(notes) == 1 and notes[0]["step"] == 134008 and notes[0]["text"].startswith("[restart] ")


def test_bigscience_excerpts_several_runs_all_columns_and_notes(receiver, init):
    counts = replay(REAL / "bigscience_chronicles_log_excerpts.csv", init, log=quiet)
    events = json.loads((REAL / "bigscience_chronicles_log_excerpts.events.json").read_text())["events"]
    assert counts["runs"] == 4 and counts["segments"] == 12
    assert counts["rows"] + counts["skipped"] == 70
    assert counts["notes"] == len(events)
    names = sorted({e["name"] for e in receiver.of_type("run_started")})
    assert names == [f"bigscience_chronicles_log_excerpts:{r}" for r in
                     ("tr1-13B-base", "tr11-176B-ml", "tr8-104B-wide", "tr8b-104B")]
    spike = next(m for m in receiver.of_type("metrics") if m["step"] == 29050)
    assert spike["values"]["train/loss"] == 7.343709 and spike["values"]["loss_scale"] == 8192.0
    assert spike["values"]["lr"] == 9.849e-05 and spike["values"]["iter_time_s"] == 22.1485
    assert "source_line" in spike["values"]  # numeric columns pass through under their names
    assert any("val/loss" in m["values"] for m in receiver.of_type("metrics"))


def test_jsonl_pacing_follows_timestamps_and_speed(receiver, init, tmp_path):
    log = tmp_path / "run.jsonl"
    rows = [
        {"step": s, "loss": 3.0 - s / 10, "learning_rate": 1e-3, "grad_norm": 0.5, "tokens_seen": 4096 * s,
         "timestamp": 1_700_000_000 + 2.0 * s}
        for s in range(1, 6)
    ]
    rows[3]["timestamp"] += 100  # a long stall: capped by max_gap
    log.write_text("\n".join(json.dumps(r) for r in rows) + "\n")
    waits: list[float] = []
    counts = replay(log, init, speed=4.0, max_gap=5.0, sleep=waits.append, log=quiet)
    assert counts == {"rows": 5, "skipped": 0, "runs": 1, "segments": 1, "notes": 0, "samples": 0}
    assert waits == [0.5, 0.5, 5.0, 0.0]  # (2 s / 4), (2 s / 4), min(5, 102 s / 4), back in time -> 0
    values = [m["values"] for m in receiver.of_type("metrics")]
    assert values[0] == {"train/loss": 2.9, "lr": 1e-3, "grad_norm": 0.5, "tokens_seen": 4096.0}


def test_metric_name_mapping_and_cli(receiver, tmp_path):
    assert metrics_of({"step": "3", "loss": "2.5", "val_loss": "", "lr": "nan", "note": "x", "segment": "a"}) == {
        "train/loss": 2.5, "lr": pytest.approx(float("nan"), nan_ok=True)}
    log = tmp_path / "tiny.csv"
    log.write_text("step,loss,segment\n1,3.0,a\n2,2.9,a\n2,2.95,a\n2,2.8,b\n3,2.7,b\n")
    env = {**os.environ, "RUNCAST_SPOOL_DIR": str(tmp_path / "spool")}
    res = subprocess.run([sys.executable, "-m", "runcast.cli.main", "replay", str(log), "--speed", "0",
                          "--server", receiver.url, "--token", "t", "--project", "demo"],
                         capture_output=True, text=True, env=env, timeout=60)
    assert res.returncode == 0, res.stderr
    assert "replayed 4 rows (1 skipped) as 1 run(s), 2 segment(s), 0 note(s)" in res.stdout
    assert [(e["step"], e["values"]["train/loss"]) for e in receiver.of_type("metrics")] == [
        (1, 3.0), (2, 2.9), (2, 2.8), (3, 2.7)]
    assert [e["resume_step"] for e in receiver.of_type("run_started")] == [None, 1]



def write_samples_log(tmp_path: Path) -> tuple[Path, list[dict]]:
    """A log of two segments (a resume at step 3) and its samples sidecar (docs/import.md)."""
    log = tmp_path / "gen.csv"
    log.write_text("step,loss,segment\n1,3.0,a\n2,2.9,a\n3,2.8,a\n3,2.85,b\n4,2.7,b\n5,2.6,b\n")
    samples = [
        {"step": 2, "prompt": "Once upon a time", "output": " there", "settings": {"temperature": 0.0}},
        {"step": 3, "segment": "a", "prompt": "Once upon a time", "output": " there was"},
        {"step": 4, "prompt": "Once upon a time", "output": " there was a", "prompt_id": "story",
         "reference": " there was a princess", "scores": {"bleu": 0.25}, "key": "gen"},
        {"step": 9, "segment": "b", "prompt": "The end", "output": "."},
    ]
    (tmp_path / "gen.samples.jsonl").write_text("".join(json.dumps(s) + "\n" for s in samples))
    return log, samples


def test_replay_sends_the_samples_when_it_reaches_their_step(receiver, init, tmp_path):
    log, samples = write_samples_log(tmp_path)
    counts = replay(log, init, log=quiet)
    assert counts["samples"] == 4 and counts["segments"] == 2
    segments = [e["segment"] for e in receiver.of_type("run_started")]
    got = [(segments.index(e["segment"]), e["step"], e["key"], e["prompt_id"], e["prompt"], e["output"],
            e.get("reference"), e.get("scores"), e.get("settings")) for e in receiver.of_type("sample")]
    story = "Once upon a time"
    from runcast.outputs import prompt_id

    assert got == [
        (0, 2, "samples", prompt_id(story), story, " there", None, None, {"temperature": 0.0}),
        (0, 3, "samples", prompt_id(story), story, " there was", None, None, None),
        (1, 4, "gen", "story", story, " there was a", " there was a princess", {"bleu": 0.25}, None),
        (1, 9, "samples", prompt_id("The end"), "The end", ".", None, None, None),  # past the log's end: at the segment's
    ]
    first_metrics_at_4 = next(i for i, e in enumerate(receiver.events()) if e["type"] == "metrics" and e["step"] == 4)
    sample_at_4 = next(i for i, e in enumerate(receiver.events()) if e["type"] == "sample" and e["step"] == 4)
    assert sample_at_4 < first_metrics_at_4  # sent when the replay reached step 4, before its row


def test_a_bad_sample_line_is_named_before_anything_is_sent(receiver, init, tmp_path):
    log, _ = write_samples_log(tmp_path)
    with open(tmp_path / "gen.samples.jsonl", "a") as f:
        f.write(json.dumps({"step": 5, "prompt": "x", "output": "y", "temperature": 1}) + "\n")
    from runcast.importers import ImportFailed

    with pytest.raises(ImportFailed, match=r"gen\.samples\.jsonl:5: unknown fields \['temperature'\]"):
        replay(log, init, log=quiet)
    assert receiver.events() == []
