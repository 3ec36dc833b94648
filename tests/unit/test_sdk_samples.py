"""run.log_samples and run.log_eval: what arrives, what is refused at the call (naming the argument)."""

from __future__ import annotations

import hashlib
import math

import numpy as np
import pytest
import torch


def test_samples_arrive_one_event_per_row_with_a_stable_default_prompt_id(make_run, receiver):
    run = make_run()
    run.log({"loss": 1.0}, step=1000)
    run.log_samples([
        {"prompt": "The capital of France is", "output": " Paris."},
        {"prompt_id": "story-3", "prompt": "Once upon a time", "output": " a tiny GPT", "reference": " a princess",
         "scores": {"bleu": np.float32(0.5), "bad": math.nan}, "settings": {"temperature": 0.8, "seed": np.int64(7)}},
    ])  # the run's current step
    run.log_samples([{"prompt": "The capital of France is", "output": " Lyon."}], step=2000, key="greedy")
    run.finish()
    samples = receiver.of_type("sample")
    pid = hashlib.sha256(b"The capital of France is").hexdigest()[:16]
    assert [(s["step"], s["key"], s["prompt_id"]) for s in samples] == [
        (1000, "samples", pid), (1000, "samples", "story-3"), (2000, "greedy", pid)]
    assert samples[0]["output"] == " Paris." and "reference" not in samples[0]
    assert samples[1]["reference"] == " a princess"
    assert samples[1]["scores"] == {"bleu": 0.5, "bad": "NaN"}
    assert samples[1]["settings"] == {"temperature": 0.8, "seed": 7}
    assert run.step == 1000  # samples record at a step; they do not move the run's


def test_samples_before_any_step_are_at_step_zero(make_run, receiver):
    run = make_run()
    run.log_samples([{"prompt": "a", "output": "b"}])
    run.finish()
    assert receiver.of_type("sample")[0]["step"] == 0


@pytest.mark.parametrize(("rows", "error", "names"), [
    ([{"prompt": "a", "output": "b"}, {"output": "b"}], ValueError, "rows.1.prompt"),
    ([{"prompt": "a", "output": 3}], ValueError, "rows.0.output"),
    ([{"prompt": "a", "output": "x" * 262_145}], ValueError, "rows.0.output"),
    ([{"prompt": "a\ud800", "output": "b"}], ValueError, "rows.0.prompt"),
    ([{"prompt": "a", "output": "b", "prompt_id": ""}], ValueError, "rows.0.prompt_id"),
    ([{"prompt": "a", "output": "b", "scores": {"s": "high"}}], TypeError, "'s'"),
    ([{"prompt": "a", "output": "b", "settings": {"x": "y" * 5000}}], ValueError, "rows.0.settings"),
    ([{"prompt": "a", "output": "b", "outptu": "typo"}], ValueError, "outptu"),
    (["a prompt"], TypeError, "rows[0]"),
    ({"prompt": "a", "output": "b"}, TypeError, "rows must be a list"),
])
def test_bad_samples_raise_and_record_nothing(make_run, receiver, rows, error, names):
    run = make_run()
    with pytest.raises(error, match=names.replace("[", r"\[").replace(".", r"\.")):
        run.log_samples(rows, step=1)
    run.finish()
    assert receiver.of_type("sample") == []


def test_a_bad_key_or_step_is_refused(make_run):
    run = make_run()
    with pytest.raises(ValueError, match="key"):
        run.log_samples([{"prompt": "a", "output": "b"}], key="bad\nkey")
    with pytest.raises(ValueError, match="step"):
        run.log_samples([{"prompt": "a", "output": "b"}], step=-1)


def test_evals_nested_or_flat_one_event_per_task(make_run, receiver):
    run = make_run()
    run.log({"loss": 1.0}, step=7)
    run.log_eval({"hellaswag": {"acc,none": 0.31, "acc_norm,none": torch.tensor(0.35)}, "arc_easy": {"acc": 0.52}},
                 suite="lm-eval-harness", checkpoint=1000, n=np.int64(100), config={"num_fewshot": 0},
                 versions={"hellaswag": 1})
    run.log_eval({"mmlu/stem/acc": 0.4, "mmlu/stem/acc_stderr": 0.01, "gsm8k/exact": math.inf}, step=2000,
                 checkpoint="step:2000")
    run.finish()
    evals = receiver.of_type("eval")
    assert [(e["suite"], e["task"], e["step"], e.get("checkpoint")) for e in evals] == [
        ("lm-eval-harness", "hellaswag", 7, 1000), ("lm-eval-harness", "arc_easy", 7, 1000),
        ("eval", "mmlu/stem", 2000, 2000), ("eval", "gsm8k", 2000, 2000)]
    assert evals[0]["metrics"] == {"acc,none": 0.31, "acc_norm,none": pytest.approx(0.35)}
    assert evals[0]["n"] == 100 and evals[0]["config"] == {"num_fewshot": 0} and evals[0]["versions"] == {"hellaswag": 1}
    assert evals[2]["metrics"] == {"acc": 0.4, "acc_stderr": 0.01} and evals[3]["metrics"] == {"exact": "Infinity"}


@pytest.mark.parametrize(("kwargs", "error", "names"), [
    ({"results": {}}, ValueError, "results"),
    ({"results": [("a", 1.0)]}, ValueError, "results"),
    ({"results": {"acc": 0.5}}, ValueError, "task/metric"),
    ({"results": {"t": {}}}, ValueError, "results.t.metrics"),
    ({"results": {"t": {"acc": "high"}}}, TypeError, "acc"),
    ({"results": {"t\n": {"acc": 1.0}}}, ValueError, r"results\.t.*\.task"),
    ({"results": {"t": {"acc": 1.0}}, "checkpoint": "5"}, ValueError, "checkpoint"),
    ({"results": {"t": {"acc": 1.0}}, "checkpoint": "step:-5"}, ValueError, "checkpoint"),
    ({"results": {"t": {"acc": 1.0}}, "checkpoint": -5}, ValueError, "checkpoint"),
    ({"results": {"t": {"acc": 1.0}}, "suite": ""}, ValueError, "suite"),
    ({"results": {"t": {"acc": 1.0}}, "n": -1}, ValueError, "'n'"),
    ({"results": {"t": {"acc": 1.0}}, "config": ["not", "an", "object"]}, TypeError, "config"),
])
def test_bad_evals_raise_and_record_nothing(make_run, receiver, kwargs, error, names):
    run = make_run()
    with pytest.raises(error, match=names):
        run.log_eval(**kwargs)
    run.finish()
    assert receiver.of_type("eval") == []


def test_disabled_runs_take_anything_and_other_ranks_check_and_record_nothing(make_run, receiver):
    import runcast

    disabled = runcast.init("p", mode="disabled")
    disabled.log_samples("not even rows")
    disabled.log_eval({})
    disabled.log_media("k", "not media")
    other = make_run(rank=1)
    with pytest.raises(ValueError):
        other.log_samples([{"prompt": "a"}])
    other.log_samples([{"prompt": "a", "output": "b"}])
    other.log_eval({"t": {"acc": 1.0}})
    other.finish()
    assert receiver.of_type("sample") == [] and receiver.of_type("eval") == []
