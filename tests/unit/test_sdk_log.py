"""Run.log and the other verbs: what they accept, what they refuse at the call site, what arrives."""

from __future__ import annotations

import hashlib
import json
import logging
import math

import numpy as np
import pytest
import runcast
import torch


def test_values_arrive_as_floats_with_nan_and_inf_as_strings(make_run, receiver):
    run = make_run()
    run.log({"loss": 2.5, "int": 3, "nan": math.nan, "inf": math.inf, "ninf": -math.inf})
    run.log({"np32": np.float32(1.5), "np64": np.float64(0.25), "npint": np.int64(7), "arr": np.array([4.0])})
    grad = torch.tensor([1.25], requires_grad=True) * 2
    run.log({"cpu": torch.tensor(0.5), "grad": grad, "bf16": torch.tensor(3.0, dtype=torch.bfloat16)})
    run.finish()
    metrics = receiver.of_type("metrics")
    assert [m["step"] for m in metrics] == [0, 1, 2]
    assert metrics[0]["values"] == {"loss": 2.5, "int": 3.0, "nan": "NaN", "inf": "Infinity", "ninf": "-Infinity"}
    assert metrics[1]["values"] == {"np32": 1.5, "np64": 0.25, "npint": 7.0, "arr": 4.0}
    assert metrics[2]["values"] == {"cpu": 0.5, "grad": 2.5, "bf16": 3.0}
    assert isinstance(metrics[0]["values"]["int"], float)


@pytest.mark.parametrize(
    ("value", "error"),
    [
        ("1.0", TypeError),
        (None, TypeError),
        (True, TypeError),
        (np.bool_(True), TypeError),
        ([1.0], TypeError),
        (1 + 2j, TypeError),
        (torch.tensor([1.0, 2.0]), ValueError),
        (torch.tensor(True), TypeError),
        (10**400, ValueError),
    ],
)
def test_bad_values_raise_naming_the_key(make_run, value, error):
    run = make_run()
    with pytest.raises(error, match="'bad'"):
        run.log({"ok": 1.0, "bad": value}, step=0)
    run.log({"ok": 1.0}, step=0)  # nothing of the refused call was recorded


@pytest.mark.parametrize("key", ["", "a\nb", "x" * 201, 7, None])
def test_bad_keys_raise(make_run, key):
    run = make_run()
    with pytest.raises(ValueError):
        run.log({key: 1.0})


@pytest.mark.parametrize("step", [-1, 1.0, "3", True, 2**53])
def test_bad_steps_raise(make_run, step):
    run = make_run()
    with pytest.raises(ValueError):
        run.log({"a": 1.0}, step=step)


def test_empty_and_non_dict_metrics_raise(make_run):
    run = make_run()
    with pytest.raises(ValueError):
        run.log({})
    with pytest.raises(TypeError):
        run.log([("a", 1.0)])  # type: ignore[arg-type]


def test_a_repeated_or_lower_step_is_left_out_with_one_warning_per_key(make_run, receiver, caplog):
    run = make_run()
    run.log({"a": 1.0})  # step 0
    run.log({"a": 2.0})  # step 1
    run.log({"a": 3.0}, step=np.int64(10))
    run.log({"b": 1.0}, step=5)  # b's first point: earlier than a's last is fine
    run.log({"b": 1.0}, step=10)  # another key at the same step as a is fine
    with caplog.at_level("WARNING", logger="runcast"):
        run.log({"a": 4.0}, step=10)  # repeated step: the first value (3.0) is kept
        run.log({"a": 4.5}, step=3)  # lower step: left out too, no second warning for 'a'
        run.log({"c": 1.0, "b": 9.0}, step=7)  # b is left out, c is kept
    warnings = [r.getMessage() for r in caplog.records if "already logged" in r.getMessage()]
    assert len(warnings) == 2 and "'a'" in warnings[0] and "'b'" in warnings[1]
    run.log({"a": 5.0})  # highest step so far + 1
    assert run.stats.ignored == 3
    run.finish()
    metrics = [(m["step"], m["values"]) for m in receiver.of_type("metrics")]
    assert metrics == [(0, {"a": 1.0}), (1, {"a": 2.0}), (10, {"a": 3.0}), (5, {"b": 1.0}), (10, {"b": 1.0}),
                       (7, {"c": 1.0}), (11, {"a": 5.0})]
    assert run.step == 11


def test_resumed_run_counts_on_after_resume_step_in_a_new_segment(make_run, receiver):
    first = make_run()
    first.log({"a": 1.0}, step=0)
    first.finish()
    second = make_run(resume=first.id, resume_step=100)
    second.log({"a": 2.0})
    second.finish()
    assert second.id == first.id and second.segment != first.segment
    started = receiver.of_type("run_started")
    assert [s["resume_step"] for s in started] == [None, 100]
    later = [m for m in receiver.of_type("metrics") if m["segment"] == second.segment]
    assert later[0]["step"] == 101 and later[0]["seq"] == 1  # the checkpoint of step 100 holds step 100's state


def test_device_tensors_are_read_by_the_sender_not_by_log(make_run, receiver, caplog):
    # A "meta" tensor has no data: reading it raises. log() must not read it (no device sync
    # on the training thread); the sender does, fails, drops that value and says so.
    run = make_run()
    run.log({"meta": torch.ones((), device="meta"), "b": 1.0}, step=0)
    with caplog.at_level(logging.WARNING, logger="runcast"):
        run.finish()
    [metrics] = receiver.of_type("metrics")
    assert metrics["values"] == {"b": 1.0}
    assert any("'meta'" in r.getMessage() for r in caplog.records)


def test_other_verbs(make_run, receiver, tmp_path):
    ckpt = tmp_path / "ckpt.pt"
    ckpt.write_bytes(b"weights" * 1000)
    folder = tmp_path / "hf"
    folder.mkdir()
    (folder / "a.bin").write_bytes(b"x" * 10)
    (folder / "b.json").write_bytes(b"{}")
    run = make_run(config={"lr": 1e-3, "path": tmp_path, "layers": (1, 2), "bad": math.nan}, seed=np.int64(7))
    run.checkpoint(ckpt, step=5, metrics={"val/loss": np.float32(1.5)}, public=False)
    run.checkpoint(folder, step=6)
    run.checkpoint(tmp_path / "gone.pt", step=1, status="pruned")
    run.data_mix({"code": 0.7, "prose": torch.tensor(0.3)}, step=5)
    run.manifest({"sources": ["code", "prose"], "rows": 10}, version="v2", step=5)
    run.note("lr spike at 5")
    run.finish()
    events = receiver.events()
    assert [e["type"] for e in events] == [
        "run_started", "checkpoint", "checkpoint", "checkpoint", "data_mix", "manifest", "note", "finished",
    ]
    started = events[0]
    assert started["config"] == {"lr": 1e-3, "path": str(tmp_path), "layers": [1, 2], "bad": "NaN"}
    assert started["seed"] == 7 and started["project"] == "sdk-tests"
    file_ckpt, dir_ckpt, pruned = events[1:4]
    assert file_ckpt["size"] == 7000 and file_ckpt["public"] is False
    assert file_ckpt["sha256"] == hashlib.sha256(ckpt.read_bytes()).hexdigest()
    assert file_ckpt["metrics"] == {"val/loss": 1.5}
    assert dir_ckpt["size"] == 12 and dir_ckpt["sha256"] is None
    assert pruned["status"] == "pruned" and pruned["size"] == 0
    assert events[4]["weights"] == {"code": 0.7, "prose": pytest.approx(0.3)}
    assert events[5]["manifest"] == {"sources": ["code", "prose"], "rows": 10}
    assert events[6]["text"] == "lr spike at 5" and events[6]["step"] is None
    assert events[7]["status"] == "finished" and events[7]["step"] is None


def test_other_verbs_validate_at_the_call_site(make_run, tmp_path):
    run = make_run()
    with pytest.raises(FileNotFoundError):
        run.checkpoint(tmp_path / "missing.pt", step=1)
    with pytest.raises(ValueError):
        run.data_mix({"a": -1.0}, step=1)
    with pytest.raises(ValueError):
        run.data_mix({"a": math.nan}, step=1)
    with pytest.raises(ValueError):
        run.data_mix({}, step=1)
    with pytest.raises(ValueError):
        run.note("   ")
    with pytest.raises(ValueError):
        run.manifest({"a": 1}, version="")
    with pytest.raises(ValueError):
        run.finish(status="done")


def test_init_validates(make_run):
    with pytest.raises(ValueError):
        make_run(project="no spaces")
    with pytest.raises(ValueError):
        make_run(visibility="secret")
    with pytest.raises(ValueError):
        make_run(resume="x")
    with pytest.raises(ValueError):
        make_run(batch_size=0)
    with pytest.raises(TypeError):
        make_run(config=[1, 2])
    with pytest.raises(ValueError):
        make_run(server="ftp://example.org")


def test_run_started_and_url(make_run, receiver):
    run = make_run(config={"a": 1}, visibility="unlisted", capture_code=True)
    run.finish()
    assert run.url == f"{receiver.url}/runs/{run.id}"
    [started] = receiver.of_type("run_started")
    assert started["seq"] == 0 and started["visibility"] == "unlisted"
    assert started["env"]["pid"] > 0 and started["env"]["rank"] == 0
    assert isinstance(started["code"], dict)
    json.dumps(started, allow_nan=False)
    assert receiver.auth[0] == "Bearer tok-123"
    assert runcast.__version__ == "0.1.0"
