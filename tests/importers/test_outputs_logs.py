"""A training log's samples sidecar (FILE.samples.jsonl) imported with its points."""

from __future__ import annotations

import json

import pytest
from outputs_core import needs_outputs_core
from runcast import importers
from runcast.outputs import prompt_id


def write(tmp_path):
    log = tmp_path / "gen.csv"
    log.write_text("step,loss,segment\n1,3.0,a\n2,2.9,a\n3,2.8,a\n3,2.85,b\n4,2.7,b\n")
    rows = [{"step": 2, "prompt": "Once", "output": " upon"},
            {"step": 4, "prompt": "Once", "output": " upon a", "scores": {"len": 2}},
            {"step": 3, "segment": "a", "prompt": "Twice", "output": "!", "key": "other"}]
    (tmp_path / "gen.samples.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    return log


def test_samples_go_to_their_segment(hub, tmp_path):
    (plan,) = hub.load([write(tmp_path)])
    sids = [e["segment"] for e in plan.started]
    got = [(sids.index(e["segment"]), e["step"], e["key"], e["prompt_id"], e["output"], e.get("scores"))
           for e in hub.outputs(plan)]
    assert got == [(0, 2, "samples", prompt_id("Once"), " upon", None), (0, 3, "other", prompt_id("Twice"), "!", None),
                   (1, 4, "samples", prompt_id("Once"), " upon a", {"len": 2.0})]


@pytest.mark.parametrize(("line", "message"), [
    ({"step": 1, "prompt": "x", "output": "y", "segment": "zz"}, "no segment 'zz' in the log"),
    ({"step": "1", "prompt": "x", "output": "y"}, "'step' must be a whole number"),
    ({"step": 1, "prompt": "x"}, "output"),
])
def test_a_bad_sample_names_its_line(hub, tmp_path, line, message):
    log = write(tmp_path)
    with open(tmp_path / "gen.samples.jsonl", "a") as f:
        f.write(json.dumps(line) + "\n")
    with pytest.raises(importers.ImportFailed, match=rf"gen\.samples\.jsonl:4: .*{message}"):
        hub.load([log])
    assert hub.runs() == []


@needs_outputs_core
def test_round_trip_what_the_server_holds(hub, tmp_path):
    (plan,) = hub.load([write(tmp_path)])
    held = hub.held(plan.run_id, "samples")
    assert [(s["segment"], s["step"], s["key"], s["output"]) for s in held] == [
        (0, 2, "samples", " upon"), (0, 3, "other", "!"), (1, 4, "samples", " upon a")]
