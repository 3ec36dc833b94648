"""The wire checks of sample, eval and media events (docs/samples.md): what is taken, normalised,
and what is refused naming the field. The SDK, the API and the worker call the same checks."""

from __future__ import annotations

import json
import math
from typing import Any

import pytest
from runcast.wire import events
from runcast.wire.checks import EventError

ENVELOPE = {"v": 1, "run": "run_aaaaaaaa", "segment": "seg_aaaaaaaa", "seq": 1, "ts": 1.0}
SAMPLE = {**ENVELOPE, "type": "sample", "step": 10, "key": "samples", "prompt_id": "p-1", "prompt": "Hi",
          "output": "there"}
EVAL = {**ENVELOPE, "type": "eval", "step": 10, "suite": "lm-eval-harness", "task": "hellaswag",
        "metrics": {"acc,none": 0.31, "acc_stderr,none": 0.004}}
IMAGE = {**ENVELOPE, "type": "media", "step": 10, "key": "gen/grid", "kind": "image", "blob": "a" * 64,
         "content_type": "image/png", "width": 64, "height": 32, "size": 1234, "caption": "step 10"}
TABLE = {**ENVELOPE, "type": "media", "step": 10, "key": "val/worst", "kind": "table", "columns": ["prompt", "loss"],
         "rows": [["a", 3.1], ["b", None], ["c", True]]}
HISTOGRAM = {**ENVELOPE, "type": "media", "step": 10, "key": "weights/l0", "kind": "histogram",
             "edges": [-1, 0, 1], "counts": [5, 7], "nan": 1}


@pytest.mark.parametrize("event", [SAMPLE, EVAL, IMAGE, TABLE, HISTOGRAM], ids=["sample", "eval", "image", "table",
                                                                             "histogram"])
def test_a_good_event_is_taken_and_round_trips_as_strict_json(event: dict[str, Any]) -> None:
    checked = events.validate_event(event)
    again = events.validate_event(json.loads(events.dumps_batch([events.encode_event(checked)]))["events"][0])
    assert again == checked


def test_scores_travel_nan_as_text() -> None:
    checked = events.validate_event({**SAMPLE, "scores": {"bleu": "NaN", "len": 3}})
    assert math.isnan(checked["scores"]["bleu"]) and events.encode_event(checked)["scores"]["bleu"] == "NaN"


BAD = [
    (SAMPLE, {"prompt_id": ""}, "prompt_id"),
    (SAMPLE, {"prompt_id": "  "}, "prompt_id"),
    (SAMPLE, {"prompt_id": "a\nb"}, "prompt_id"),
    (SAMPLE, {"output": "x" * 262_145}, "output"),
    (SAMPLE, {"output": "bad\ud800"}, "output"),
    (SAMPLE, {"prompt": "nul\x00"}, "prompt"),
    (SAMPLE, {"output": 3}, "output"),
    (SAMPLE, {"key": ""}, "key"),
    (SAMPLE, {"scores": {"bleu": "high"}}, "scores.bleu"),
    (SAMPLE, {"settings": {"t": [1] * 5000}}, "settings"),
    (SAMPLE, {"step": -1}, "step"),
    (EVAL, {"metrics": {}}, "metrics"),
    (EVAL, {"suite": ""}, "suite"),
    (EVAL, {"task": "x" * 201}, "task"),
    (EVAL, {"checkpoint": "step:10"}, "checkpoint"),
    (EVAL, {"n": -3}, "n"),
    (IMAGE, {"blob": "A" * 64}, "blob"),
    (IMAGE, {"content_type": "image/svg+xml"}, "content_type"),
    (IMAGE, {"content_type": "text/html"}, "content_type"),
    (IMAGE, {"width": 0}, "width"),
    (IMAGE, {"kind": "video"}, "kind"),
    (TABLE, {"rows": [["a", 1], ["b"]]}, "rows.1"),
    (TABLE, {"rows": [["a", float("inf")]]}, "rows.0.1"),
    (TABLE, {"rows": [["a", {"x": 1}]]}, "rows.0.1"),
    (TABLE, {"columns": []}, "columns"),
    (TABLE, {"rows": [["x" * 10_001, 1]]}, "rows.0.0"),
    (TABLE, {"rows": [["x" * 9000, 1]] * 40}, "rows"),
    (HISTOGRAM, {"edges": [0, 0, 1]}, "edges"),
    (HISTOGRAM, {"counts": [1]}, "counts"),
    (HISTOGRAM, {"counts": [1, -1]}, "counts.1"),
    (HISTOGRAM, {"edges": [0, "NaN", 1]}, "edges.1"),
    (HISTOGRAM, {"edges": list(range(600)), "counts": [1] * 599}, "edges"),
    (HISTOGRAM, {"edges": [0, 10**400]}, "edges.1"),
    (HISTOGRAM, {"counts": [1, 10**400]}, "counts.1"),
    (EVAL, {"task": "a\x85b"}, "task"),
]


@pytest.mark.parametrize(("base", "change", "field"), BAD, ids=[f"{b['type']}-{f}" for b, _, f in BAD])
def test_a_bad_field_is_refused_by_name(base: dict[str, Any], change: dict[str, Any], field: str) -> None:
    with pytest.raises(EventError) as caught:
        events.validate_event({**base, **change})
    assert caught.value.field == field
