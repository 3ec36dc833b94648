"""Where a run ran (paths, host, user, pid) is shown only to its project's readers, or to
everyone when the run opted in: the rules of ``reads/published.py`` and the routes that use them."""

from __future__ import annotations

from typing import Any

import pytest
from runcast_server.reads.published import (
    WITHHELD,
    looks_like_path,
    published_checkpoint,
    published_code,
    published_config,
    published_env,
    published_note,
)

ENV = {"python": "3.11.7", "platform": "Linux-6.1-x86_64", "host": "gpu-node-17", "pid": 41234, "user": "alice",
       "cwd": "/home/alice/exp", "rank": 0, "world_size": 8, "torch": "2.13.0"}
CONFIG = {"out_dir": "out-runcast", "data_dir": "data/shards", "lr": 3e-4, "n_dirs": 3, "data": {"train_path": ["a.bin", "b.bin"], "seq": 2048},
          "deepspeed": "/opt/cfg/ds.json", "cmd": "python train.py --save /scratch/alice/run7", "note": "and/or 1/2/3",
          "url": "https://example.org/a/b", "home_cache": "~/.cache/hf", "win": "C:\\runs\\r1"}
CHECKPOINT = {"path": "/srv/runcast/storage/run7/ckpt_0000100.pt", "size": 1234, "sha256": "a" * 64,
              "metrics": {"val/loss": 2.5}, "public": True, "status": "available"}


@pytest.mark.parametrize("text", ["/home/a", "~", "~/x", "~alice/x", "C:\\x", "c:/x", "\\\\srv\\share", "file:///x",
                                  "saved in /data/run1/ckpt", "see ~/runs/a for it"])
def test_paths_are_recognised(text: str) -> None:
    assert looks_like_path(text)


@pytest.mark.parametrize("text", ["https://host/a/b", "1/2/3", "and/or", "cosine", "2024/01/02", "out-runcast",
                                  "s3://bucket/a/b", "git@github.com:org/repo.git", "lr 3e-4 / 2"])
def test_other_text_is_not_a_path(text: str) -> None:
    assert not looks_like_path(text)


def test_config_keeps_its_shape_with_path_like_values_withheld() -> None:
    # Judged by the value: a bare name under a path-like key says nothing of the machine; a path does.
    assert published_config(CONFIG, full=False) == {
        "out_dir": "out-runcast", "data_dir": WITHHELD, "lr": 3e-4, "n_dirs": 3,
        "data": {"train_path": ["a.bin", "b.bin"], "seq": 2048},
        "deepspeed": WITHHELD, "cmd": WITHHELD, "note": "and/or 1/2/3", "url": "https://example.org/a/b",
        "home_cache": WITHHELD, "win": WITHHELD,
    }
    assert published_config(CONFIG, full=True) == CONFIG


def test_an_imported_runs_file_name_is_shown_and_its_path_is_not() -> None:
    named = {"imported_from": {"format": "training_log", "file": "pythia-410m.jsonl"}}
    assert published_env(named, full=False) == named
    placed = {"imported_from": {"format": "training_log", "file": "/home/alice/logs/pythia-410m.jsonl"}}
    assert published_env(placed, full=False) == {"imported_from": {"format": "training_log", "file": WITHHELD}}


def test_environment_host_fields_are_withheld() -> None:
    assert published_env(ENV, full=False) == {**ENV, "host": WITHHELD, "pid": WITHHELD, "user": WITHHELD,
                                              "cwd": WITHHELD}
    assert published_env(ENV, full=True) == ENV


def test_checkpoints_show_their_file_name() -> None:
    public = published_checkpoint(CHECKPOINT, full=False)
    assert public == {**{k: v for k, v in CHECKPOINT.items() if k != "path"}, "filename": "ckpt_0000100.pt"}
    assert published_checkpoint(CHECKPOINT, full=True) == {**CHECKPOINT, "filename": "ckpt_0000100.pt"}
    assert published_checkpoint({"path": "C:\\ck\\a.pt"}, full=False) == {"filename": "a.pt"}
    assert published_checkpoint({"path": "/ck/step_100/"}, full=False) == {"filename": "step_100"}


def test_notes_and_remotes() -> None:
    assert published_note("resumed from /home/a/ckpt.pt at step 5", full=False) == "resumed from [path] at step 5"
    assert published_note("lr x10 at https://ex.org/a/b", full=False) == "lr x10 at https://ex.org/a/b"
    assert published_code({"remote": "/srv/git/x.git", "sha": "f" * 40}, full=False)["remote"] == WITHHELD
    assert published_code({"remote": "git@github.com:o/r.git"}, full=False)["remote"] == "git@github.com:o/r.git"
    assert published_code({"remote": "/srv/git/x.git"}, full=True)["remote"] == "/srv/git/x.git"


def _run(seed: Any, project: str = "demo", **start: Any) -> Any:
    sim = seed.run(project=project, name="where").start(config=CONFIG, env=ENV, code={"remote": "/srv/git/x.git"},
                                                        **start)
    sim.send([sim.event("checkpoint", step=100, **CHECKPOINT),
              sim.event("note", step=100, text="saved to /home/alice/exp/ckpt")])
    return sim


def test_routes_show_paths_only_to_the_runs_own_project(client: Any, seed: Any) -> None:
    sim = _run(seed)
    other = seed.token("other")  # a token of another project is a stranger here
    for headers in ({}, {"Authorization": f"Bearer {other}"}):
        detail = client.get(f"/api/v1/runs/{sim.run}", headers=headers).json()
        assert (detail["env"]["host"], detail["env"]["pid"], detail["config"]["deepspeed"]) == (WITHHELD,) * 3
        assert detail["public_paths"] is False and detail["code"]["remote"] == WITHHELD
        events = client.get(f"/api/v1/runs/{sim.run}/events", headers=headers).text
        for secret in ("gpu-node-17", "41234", "/srv/runcast", "/home/alice", "/scratch/alice", "/opt/cfg"):
            assert secret not in events and secret not in str(detail)

    own = {"Authorization": f"Bearer {seed.token('demo')}"}
    detail = client.get(f"/api/v1/runs/{sim.run}", headers=own).json()
    assert detail["env"] == ENV and detail["config"] == CONFIG and detail["code"]["remote"] == "/srv/git/x.git"
    events = {e["type"]: e["payload"] for e in client.get(f"/api/v1/runs/{sim.run}/events", headers=own).json()["events"]}
    assert events["checkpoint"]["path"] == CHECKPOINT["path"] and events["note"]["text"] == "saved to /home/alice/exp/ckpt"
    assert events["run_started"]["env"] == ENV


def test_a_run_that_opted_in_shows_everything_to_everyone(client: Any, seed: Any) -> None:
    sim = _run(seed, public_paths=True)
    detail = client.get(f"/api/v1/runs/{sim.run}").json()
    assert detail["public_paths"] is True and detail["env"] == ENV and detail["config"] == CONFIG
    events = {e["type"]: e["payload"] for e in client.get(f"/api/v1/runs/{sim.run}/events").json()["events"]}
    assert events["checkpoint"]["path"] == CHECKPOINT["path"] and events["checkpoint"]["filename"] == "ckpt_0000100.pt"


def test_the_opt_in_must_be_a_boolean(client: Any, seed: Any) -> None:
    from alerts.helpers import WireRun

    wire = WireRun(project="demo")
    r = client.post("/api/v1/ingest", json={"v": 1, "events": [wire.started(public_paths="yes")]},
                    headers={"Authorization": f"Bearer {seed.token('demo')}"})
    assert r.status_code == 422 and r.json()["error"]["field"].endswith("public_paths")
    assert client.get(f"/api/v1/runs/{wire.run}").status_code == 404
