"""The SDK refuses at the call what the server would refuse (one validation: runcast.wire.events),
with a message naming the argument; what the SDK captures itself (host, git diff) is made
storable instead, so a service-side rule can never stop a training job."""

from __future__ import annotations

import pytest
from runcast.wire import events as ev

S = "\ud800"


def _deep(levels: int) -> dict:
    node: dict = {}
    for _ in range(levels - 1):
        node = {"a": node}
    return node


@pytest.mark.parametrize(("call", "match"), [
    (lambda run: run.log({S: 1.0}), "lone surrogate"),
    (lambda run: run.log({"a\x00": 1.0}), "control characters"),
    (lambda run: run.log({"a": 1.0}, step=2**53), "step"),
    (lambda run: run.log({"a": 10**400}), "too large"),
    (lambda run: run.note(S), "text"),
    (lambda run: run.note("a\x00b"), "NUL"),
    (lambda run: run.manifest({"files": [S]}, version="v1"), "manifest"),
    (lambda run: run.manifest(_deep(65), version="v1"), "nested more than 64"),
    (lambda run: run.manifest({"n": 2**70}, version="v1"), "manifest"),
    (lambda run: run.manifest({}, version=S), "version"),
    (lambda run: run.data_mix({S: 1.0}, step=1), "lone surrogate"),
], ids=["key-surrogate", "key-nul", "step", "huge-int", "note-surrogate", "note-nul", "manifest-surrogate",
        "manifest-deep", "manifest-int", "version", "mix-source"])
def test_bad_arguments_raise_at_the_call(make_run, receiver, call, match):
    run = make_run()
    with pytest.raises(ValueError, match=match):
        call(run)
    run.log({"ok": 1.0}, step=1)  # the run goes on
    run.finish()
    assert [e["values"] for e in receiver.of_type("metrics")] == [{"ok": 1.0}]


@pytest.mark.parametrize(("kwargs", "match"), [
    ({"config": _deep(65)}, "nested more than 64"),
    ({"config": {"k": S}}, "config"),
    ({"config": {S: 1}}, "config"),
    ({"config": {"big": 2**64}}, "config"),
    ({"seed": 2**63}, "seed"),
    ({"name": S}, "name"),
    ({"resume_step": 2**53}, "resume_step"),
])
def test_bad_init_arguments_raise(make_run, kwargs, match):
    with pytest.raises(ValueError, match=match):
        make_run(**kwargs)


def test_config_at_the_limit_is_accepted(make_run, receiver):
    run = make_run(config=_deep(64))
    run.finish()
    (started,) = receiver.of_type("run_started")
    ev.check_json(started["config"], "config", ev.MAX_CONFIG_BYTES)


def test_what_the_sdk_captures_is_made_storable(make_run, receiver, monkeypatch):
    """A NUL in a diff or a surrogate-escaped host name must not stop the run from starting."""
    from runcast import runtime

    monkeypatch.setattr(runtime, "code_revision", lambda *a, **k: {
        "sha": "1" * 40, "diff": "binary\x00junk " + S, "dirty": True, "diff_truncated": False})
    real = runtime.environment
    monkeypatch.setattr(runtime, "environment", lambda rank=None: {**real(rank), "host": "h\udcff"})
    run = make_run(capture_code=True)
    run.log({"loss": 1.0}, step=1)
    run.finish()
    (started,) = receiver.of_type("run_started")
    assert started["code"]["diff"] == "binary\ufffdjunk ?"
    assert started["env"]["host"] == "h?"
    ev.validate_event(started)  # what the server checks: it passes
    assert len(receiver.of_type("metrics")) == 1
