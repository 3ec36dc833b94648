"""Hostile and edge input to the W&B habits (live rename, nested dicts, commit=False, define_metric,
module-level config): each raises at the call naming what is wrong, or sends exactly what it should."""

from __future__ import annotations

import pytest

import runcast


def test_describing_a_run_refuses_bad_values_and_sends_good_ones(make_run, receiver):
    run = make_run()
    for field, value, match in (("name", None, r"run\.name"), ("name", "a\x00", r"run\.name"),
                                ("tags", "one-string", "sequence"), ("tags", [1], r"tags\.0"),
                                ("tags", ["x"] * 2 + ["t" * 65], r"tags\.2"), ("group", "g" * 129, "group"),
                                ("notes", "\ud800", "notes")):
        with pytest.raises(ValueError, match=match):
            setattr(run, field, value)
    run.tags = ["a", "a", "b"]
    run.group = None
    run.finish()
    assert (run.tags, run.group) == (("a", "b"), None)
    assert [e.get("tags", e.get("group")) for e in receiver.of_type("update")] == [["a", "b"], ""]


def test_nested_dicts_flatten_and_clashes_raise(make_run, receiver):
    run = make_run()
    with pytest.raises(ValueError, match="both as a name and inside a nested dict"):
        run.log({"a.b": 1.0, "a": {"b": 2.0}})
    with pytest.raises(ValueError, match="once nested dicts are flattened"):
        run.log({"a": {str(i): 1.0 for i in range(1001)}})
    run.log({"a": {}, "b": 1.0}, step=0)  # an empty dict adds nothing
    run.log({"a": {"b": {"c": 2.0}}}, step=1)
    run.finish()
    assert [(e["step"], e["values"]) for e in receiver.of_type("metrics")] == [(0, {"b": 1.0}), (1, {"a.b.c": 2.0})]


def test_commit_false_with_a_bad_value_is_left_out_at_finish(make_run, receiver, caplog):
    run = make_run()
    run.log({"ok": 1.0}, commit=False)
    run.log({"bad": "text"}, commit=False)
    run.finish()
    assert "commit=False are left out" in caplog.text and run.finished
    assert receiver.of_type("metrics") == []


def test_define_metric_refuses_what_it_cannot_honour(make_run):
    run = make_run()
    with pytest.raises(TypeError, match="unexpected keyword argument 'colour'"):
        run.define_metric("a", colour="red")
    with pytest.raises(ValueError, match="summary='best' needs goal"):
        run.define_metric("a", summary="best")
    with pytest.raises(ValueError, match="not both"):
        run.define_metric("a", "tokens", x="time")
    run.define_metric("a", hidden=True, step_sync=True, overwrite=True)
    run.finish()


def test_module_level_names_before_init():
    runcast.finish()
    assert not hasattr(runcast.config, "__deepcopy__")
    with pytest.raises(RuntimeError, match=r"runcast.summary needs a run"):
        dict(runcast.summary)
    with pytest.raises(RuntimeError, match=r"runcast.define_metric\(\) needs a run"):
        runcast.define_metric("loss", summary="min")
    assert repr(runcast.config) == "config(no run)"
