"""W&B habits that used to fail silently in the SDK, against a real embedded ``runcast serve``.

Renaming and retagging a live run (online, offline then ``runcast sync``), ``allow_val_change``,
glob metric declarations with ``goal=`` and ``step_metric=``, module-level ``runcast.config`` /
``summary`` / ``define_metric``, ``log(commit=False)`` and nested dicts, a second ``init`` without
``finish``, and the CLI's help. Every figure is read back through the REST API.
"""

from __future__ import annotations

import logging
import subprocess
from pathlib import Path
from typing import Any

import httpx
import pytest
import services

import runcast


PROJECT = "habits"


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory, start_embedded_server: Any) -> Any:
    """One embedded ``runcast serve`` for the module: (url, token of PROJECT, token of "other", env)."""
    yield from start_embedded_server(tmp_path_factory, PROJECT)


def points(api: httpx.Client, run_id: str, key: str) -> list[tuple[int, Any]]:
    body = api.get(f"/runs/{run_id}/metrics", params={"key": key, "max_points": 20000}).json()
    return [p for s in body["series"] for p in zip(s["step"], s["last"], strict=True)]


def sync(server: Any, spool: Path, token: str) -> subprocess.CompletedProcess[str]:
    url, _, _, env = server
    return subprocess.run([str(services.BIN / "runcast"), "sync", str(spool), "--server", url, "--token", token],
                          env=services.child_env(env), capture_output=True, text=True, timeout=120)


def described(api: httpx.Client, run_id: str) -> tuple[str, list[str], str | None, str | None]:
    body = api.get(f"/runs/{run_id}").json()
    return body["name"], body["tags"], body["notes"], body["group"]


def test_setting_name_tags_notes_group_reaches_the_server_in_order(server, tmp_path, api):
    url, mine, _, _ = server
    run = runcast.init(project=PROJECT, name="first", tags=["a"], server=url, token=mine, dir=tmp_path / "spool")
    run.log({"loss": 1.0})
    run.name = "renamed"
    run.tags = ("b", "c")
    run.tags = [*run.tags, "d"]
    run.notes = "lr too high"
    run.group = "sweep-1"
    with pytest.raises(ValueError, match=r"tags\.0"):
        run.tags = ["bad,tag"]
    with pytest.raises(ValueError, match="name"):
        run.name = ""
    assert run.tags == ("b", "c", "d")  # a refused value changes nothing here
    run.finish()
    assert described(api, run.id) == ("renamed", ["b", "c", "d"], "lr too high", "sweep-1")
    # a rename by hand (PATCH) after the run is kept: the run's own later changes are the ones that replace it
    assert api.patch(f"/runs/{run.id}", json={"name": "by hand"}).status_code == 200
    assert described(api, run.id)[0] == "by hand"


def test_renaming_offline_then_sync_and_another_projects_token(server, tmp_path, api):
    url, mine, other, _ = server
    run = runcast.init(project=PROJECT, name="offline-first", mode="offline", dir=tmp_path / "spool")
    run.log({"loss": 1.0})
    run.name = "offline-renamed"
    run.tags = ["synced"]
    run.notes = ""  # clears
    run.finish()
    refused = sync(server, tmp_path / "spool", other)
    assert refused.returncode != 0
    assert api.get(f"/runs/{run.id}").status_code == 404
    res = sync(server, tmp_path / "spool", mine)
    assert res.returncode == 0, res.stdout + res.stderr
    assert described(api, run.id) == ("offline-renamed", ["synced"], None, None)
    assert api.get("/runs", params={"tag": "synced"}).json()["runs"][0]["id"] == run.id


def test_renames_arriving_out_of_order_end_in_trainer_order(server, tmp_path, api):
    url, mine, other, _ = server
    with runcast.init(project=PROJECT, name="ordered", server=url, token=mine, dir=tmp_path / "s") as run:
        run.log({"loss": 1.0})
        assert run.flush()
    base = {"v": 1, "type": "update", "run": run.id, "segment": run.segment}
    late = {**base, "seq": 10**6 + 1, "ts": 2e9, "name": "last", "tags": ["z"]}
    early = {**base, "seq": 10**6, "ts": 1e9, "name": "first", "tags": ["y"], "notes": "n"}
    for event in (late, early):  # the trainer's later rename arrives first
        assert api.post("/ingest", json={"v": 1, "events": [event]}).status_code == 202
    assert described(api, run.id) == ("last", ["z"], "n", None)
    assert api.post("/ingest", json={"v": 1, "events": [early]}).status_code == 202  # a redelivery changes nothing
    assert described(api, run.id) == ("last", ["z"], "n", None)
    foreign = httpx.post(f"{url}/api/v1/ingest", headers={"Authorization": f"Bearer {other}"},
                         json={"v": 1, "events": [{**late, "seq": 10**6 + 2, "name": "hijacked"}]}, timeout=30)
    assert foreign.status_code in (403, 404, 409), foreign.text
    assert described(api, run.id)[0] == "last"


def test_ingest_refuses_a_bad_update_naming_the_field(server, api):
    url, mine, _, _ = server
    base = {"v": 1, "type": "update", "run": "rename-target-1", "segment": "seg-00000001", "seq": 1, "ts": 1.0}
    for field, value in (("name", ""), ("tags", ["a,b"]), ("group", "g" * 129), ("notes", 5)):
        res = api.post("/ingest", json={"v": 1, "events": [{**base, field: value}]})
        assert res.status_code == 422, res.text
        assert res.json()["error"]["field"].split(".")[-1] in (field, "0", "1"), res.text


def test_allow_val_change_is_a_keyword_not_a_config_key(server, tmp_path, api):
    url, mine, _, _ = server
    with runcast.init(project=PROJECT, config={"lr": 1.0}, server=url, token=mine, dir=tmp_path / "s") as run:
        run.config.update({"lr": 0.5}, allow_val_change=True)
        run.config.update(allow_val_change=True, warmup=10)
    assert api.get(f"/runs/{run.id}").json()["config"] == {"lr": 0.5, "warmup": 10}


def test_define_metric_globs_goal_and_step_metric(server, tmp_path, api):
    url, mine, _, _ = server
    with runcast.init(project=PROJECT, server=url, token=mine, dir=tmp_path / "s") as run:
        run.log({"val/early": 5.0}, step=0)
        run.define_metric("val/*", summary="min")
        run.define_metric("acc", goal="maximize")
        run.define_metric("train/loss", step_metric="tokens", summary="best", goal="minimize")
        with pytest.raises(ValueError, match="goal"):
            run.define_metric("x", goal="lower")
        with pytest.raises(ValueError, match="step_metric"):
            run.define_metric("x", step_metric="epoch")
        for step, value in enumerate([3.0, 1.0, 2.0]):
            run.log({"val/loss": value, "val/early": value + 1, "acc": value, "train/loss": value},
                    step=step + 1)
    body = api.get(f"/runs/{run.id}").json()
    assert body["metrics"]["val/loss"] == {"x": "step", "summary": "min"}
    assert body["metrics"]["train/loss"] == {"x": "tokens", "summary": "min"}
    assert body["summary"]["val/loss"] == 1.0 and body["summary"]["val/early"] == 2.0
    assert body["summary"]["acc"] == 3.0


def test_module_level_config_summary_define_metric(server, tmp_path, api):
    url, mine, _, _ = server
    runcast.finish()
    with pytest.raises(RuntimeError, match="runcast.init"):
        runcast.config["lr"] = 1.0
    run = runcast.init(project=PROJECT, config={"lr": 1.0}, server=url, token=mine, dir=tmp_path / "s")
    runcast.config["lr"] = 0.1
    runcast.config.update({"layers": 2})
    assert runcast.config["lr"] == 0.1 and dict(runcast.config) == {"lr": 0.1, "layers": 2}
    runcast.define_metric("loss", summary="max")
    runcast.log({"loss": 1.0})
    runcast.log({"loss": 2.0})
    runcast.summary["final"] = 7
    runcast.finish()
    body = api.get(f"/runs/{run.id}").json()
    assert body["config"] == {"lr": 0.1, "layers": 2}
    assert body["summary"] == {"loss": 2.0, "final": 7}


def test_log_commit_false_accumulates_and_nested_dicts_flatten(server, tmp_path, api):
    url, mine, _, _ = server
    with runcast.init(project=PROJECT, server=url, token=mine, dir=tmp_path / "s") as run:
        run.log({"a": 1.0}, commit=False)
        run.log({"b": 2.0}, commit=False)
        assert run.step == -1  # nothing committed yet
        run.log({"c": 3.0})  # step 0: a, b and c
        run.log({"train": {"loss": 1.5, "inner": {"x": 4.0}}})  # step 1
        run.log({"a": 5.0}, step=5, commit=False)
        run.log({"b": 6.0}, step=6)  # a later step commits the pending one first
        run.log({"a": 7.0}, commit=False)  # sent by finish()
    assert points(api, run.id, "a") == [(0, 1.0), (5, 5.0), (7, 7.0)]
    assert points(api, run.id, "b") == [(0, 2.0), (6, 6.0)]
    assert points(api, run.id, "c") == [(0, 3.0)]
    assert points(api, run.id, "train.loss") == [(1, 1.5)]
    assert points(api, run.id, "train.inner.x") == [(1, 4.0)]


def test_a_second_init_finishes_the_first_with_a_warning(server, tmp_path, api, caplog):
    url, mine, _, _ = server
    first = runcast.init(project=PROJECT, name="first-of-two", server=url, token=mine, dir=tmp_path / "a")
    runcast.log({"loss": 1.0})
    with caplog.at_level(logging.WARNING, logger="runcast"):
        second = runcast.init(project=PROJECT, name="second-of-two", server=url, token=mine, dir=tmp_path / "b")
    assert "finishing run" in caplog.text and first.id in caplog.text
    assert first.finished and runcast.run is second
    assert api.get(f"/runs/{first.id}").json()["status"] == "finished"
    runcast.finish()


def test_reinit_create_new_leaves_the_open_run_open(server, tmp_path, api):
    """W&B's ``reinit="create_new"``: several runs open in one process (a sweep in one process)."""
    url, mine, _, _ = server
    first = runcast.init(project=PROJECT, name="one-of-two", server=url, token=mine, dir=tmp_path / "a")
    second = runcast.init(project=PROJECT, name="two-of-two", server=url, token=mine, dir=tmp_path / "b",
                          reinit="create_new")
    assert not first.finished and runcast.run is second
    first.log({"loss": 1.0}, step=1)
    second.log({"loss": 2.0}, step=1)
    first.finish()
    runcast.finish()
    assert [api.get(f"/runs/{r.id}").json()["status"] for r in (first, second)] == ["finished", "finished"]
    with pytest.raises(ValueError, match="reinit"):
        runcast.init(project=PROJECT, server=url, token=mine, reinit="sometimes")
    assert runcast.run is None  # nothing started


@pytest.mark.parametrize("verb", ["sync", "import", "export", "download"])
def test_cli_help_shows_no_none_defaults(verb):
    res = subprocess.run([str(services.BIN / "runcast"), verb, "--help"], capture_output=True, text=True,
                         timeout=60, env=services.child_env({}))
    assert res.returncode == 0, res.stderr
    assert "(default: None)" not in res.stdout
