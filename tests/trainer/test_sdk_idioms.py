"""The SDK as a user coming from W&B or MLflow drives it, against a real embedded ``runcast serve``.

init() fails loud at the start (a bad token, another project's token) and never later; an
unreachable server spools; log() never raises for the order of steps; offline and disabled
modes; config and summary updates; resume continuing after the stored last step; tags and
groups filtering the run list. Every count is read back through the REST API.
"""

from __future__ import annotations

import json
import logging
import threading
import time
from pathlib import Path
from typing import Any

import httpx
import pytest
import services

import runcast

from runcast import InitError

PROJECT = "idioms"


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory, start_embedded_server: Any) -> Any:
    """One embedded ``runcast serve`` for the module: (url, token of PROJECT, token of "other", env)."""
    yield from start_embedded_server(tmp_path_factory, PROJECT)


def points(api: httpx.Client, run_id: str, key: str) -> list[list[tuple[int, Any]]]:
    """Every stored point of ``key`` per segment, raw: [[(step, value), ...], ...]."""
    body = api.get(f"/runs/{run_id}/metrics", params={"key": key, "max_points": 20000}).json()
    assert body["level"] == 0
    return [list(zip(s["step"], s["last"], strict=True)) for s in body["series"]]


def sync(server: Any, spool: Path, token: str | None = None) -> None:
    import subprocess

    url, mine, _, env = server
    res = subprocess.run([str(services.BIN / "runcast"), "sync", str(spool), "--server", url, "--token",
                          token or mine], env=services.child_env(env), capture_output=True, text=True, timeout=120)
    assert res.returncode == 0, res.stdout + res.stderr


def test_a_bad_token_raises_at_init_within_5s(server, tmp_path, caplog):
    url, _, _, _ = server
    began = time.monotonic()
    with pytest.raises(InitError, match="refused the token: the token is invalid or revoked"):
        runcast.init(project=PROJECT, server=url, token="rc_not_a_token", dir=tmp_path / "spool")
    assert time.monotonic() - began < 5
    with pytest.raises(InitError, match="no token given"):
        runcast.init(project=PROJECT, server=url, dir=tmp_path / "spool")
    assert not (tmp_path / "spool").exists()  # nothing recorded, nothing to clean up


def test_another_projects_token_raises_and_warn_runs_offline(server, tmp_path, api, caplog):
    url, mine, other, _ = server
    with pytest.raises(InitError, match="the token is for project 'other', not 'idioms'"):
        runcast.init(project=PROJECT, server=url, token=other, dir=tmp_path / "spool")
    with caplog.at_level(logging.ERROR, logger="runcast"):
        run = runcast.init(project=PROJECT, name="warned", server=url, token=other, on_error="warn",
                           dir=tmp_path / "spool")
    assert "recorded offline instead" in caplog.text and run.url is None
    for step in range(20):
        run.log({"loss": 1.0 / (step + 1)}, step=step)
    run.finish()
    assert run.stats.sent == 0 and run.stats.spooled == run.stats.logged
    assert api.get(f"/runs/{run.id}").status_code == 404  # nothing reached the server ...
    sync(server, tmp_path / "spool", mine)  # ... until it is sent with the right token
    assert [len(s) for s in points(api, run.id, "loss")] == [20]


def test_project_defaults_to_the_tokens_project(server, tmp_path, api):
    url, mine, _, _ = server
    with runcast.init(server=url, token=mine, dir=tmp_path / "spool") as run:
        run.log({"loss": 1.0})
    assert run.project == PROJECT and run.name == f"run-{run.id[:8]}"
    assert api.get(f"/runs/{run.id}").json()["project"] == PROJECT


def test_an_unreachable_server_spools_and_sync_delivers_exact_counts(server, tmp_path, api):
    _, mine, _, _ = server
    dead = f"http://127.0.0.1:{services.free_port()}"
    began = time.monotonic()
    run = runcast.init(project=PROJECT, name="unreachable", server=dead, token=mine, dir=tmp_path / "spool",
                       retry_initial=0.05, retry_max=0.2)
    assert time.monotonic() - began < 5
    for step in range(500):
        run.log({"loss": float(step), "lr": 1e-3}, step=step)
    run.finish(timeout=1)
    assert run.stats.sent == 0 and run.stats.dropped == 0
    sync(server, tmp_path / "spool")
    loss = points(api, run.id, "loss")
    assert [len(s) for s in loss] == [500] and loss[0] == [(s, float(s)) for s in range(500)]
    assert [len(s) for s in points(api, run.id, "lr")] == [500]
    assert api.get(f"/runs/{run.id}").json()["status"] == "finished"


def test_log_never_raises_for_step_order_and_the_first_value_at_a_step_is_stored(server, tmp_path, api, caplog):
    url, mine, _, _ = server
    run = runcast.init(project=PROJECT, name="order", server=url, token=mine, dir=tmp_path / "spool")
    with caplog.at_level(logging.WARNING, logger="runcast"):
        for step in range(10):
            run.log({"loss": float(step)}, step=step)
        run.log({"loss": 50.0}, step=5)  # a lower step (a callback logging late)
        run.log({"loss": 90.0}, step=9)  # the same step twice (gradient accumulation)
        run.log({"loss": 91.0, "acc": 0.5}, step=9)  # acc is new at step 9: kept; loss left out
        run.log({"loss": 10.0})  # the next step after the highest: 10
    run.finish()
    assert caplog.text.count("'loss' was already logged") == 1 and run.stats.ignored == 3
    assert points(api, run.id, "loss") == [[(s, float(s)) for s in range(11)]]
    assert points(api, run.id, "acc") == [[(9, 0.5)]]


def test_offline_then_sync_stores_the_same_run_as_online(server, tmp_path, api):
    url, mine, _, _ = server

    def script(run: runcast.Run) -> None:
        run.define_metric("loss", summary="min")
        for step in range(30):
            run.log({"loss": 3.0 - step / 10, "tokens": 512.0 * step}, step=step)
            if step == 10:
                run.config["lr"] = 1e-4  # a schedule change mid-run
        run.summary["best_step"] = 29
        run.note("done")
        run.finish()

    kw = {"project": PROJECT, "config": {"lr": 3e-4, "layers": 2}, "tags": ["cmp"], "group": "offline-vs-online"}
    online = runcast.init(name="online", server=url, token=mine, dir=tmp_path / "a", **kw)
    script(online)
    offline = runcast.init(name="offline", mode="offline", dir=tmp_path / "b", **kw)
    script(offline)
    assert api.get(f"/runs/{offline.id}").status_code == 404
    sync(server, tmp_path / "b")

    def stored(run_id: str) -> dict[str, Any]:
        body = api.get(f"/runs/{run_id}").json()
        events = api.get(f"/runs/{run_id}/events").json()["events"]
        rows = [json.loads(line) for line in api.get(f"/runs/{run_id}/export", params={"format": "jsonl"}).text.splitlines()]
        assert rows and all(r.pop("time") is not None for r in rows)  # each step's time: when each run logged it
        export = rows
        return {"keys": body["keys"], "config": body["config"], "summary": body["summary"], "tags": body["tags"],
                "group": body["group"], "status": body["status"], "metrics": body["metrics"], "export": export,
                "events": [(e["type"], e["step"]) for e in events]}

    a, b = stored(online.id), stored(offline.id)
    assert a == b
    assert a["config"] == {"lr": 1e-4, "layers": 2} and a["summary"] == {"loss": pytest.approx(0.1), "best_step": 29}
    assert a["metrics"] == {"loss": {"x": "step", "summary": "min"}}
    assert len(a["export"]) == 60


def test_disabled_mode_sends_nothing_and_starts_nothing(server, tmp_path, api, monkeypatch):
    url, mine, _, _ = server
    monkeypatch.setenv("RUNCAST_MODE", "disabled")
    before = set(threading.enumerate())
    asked: list[Any] = []
    monkeypatch.setattr(httpx, "get", lambda *a, **k: asked.append(a))  # no whoami either
    run = runcast.init(project=PROJECT, name="disabled", server=url, token=mine, dir=tmp_path / "spool")
    for step in range(10_000):
        run.log({"loss": float(step)}, step=step)
    run.log({"loss": 1.0}, step=0)  # not even the order is checked
    run.config["lr"] = 1.0
    run.summary["x"] = 1
    run.finish()
    assert [t.name for t in threading.enumerate() if t not in before] == [] and asked == []
    assert not (tmp_path / "spool").exists() and run.url is None
    assert run.stats.logged == 0
    assert [r for r in api.get("/runs", params={"project": PROJECT}).json()["runs"] if r["id"] == run.id] == []


@pytest.mark.parametrize(("keys", "steps", "batches"), [
    (1, 45_000, [20_000, 20_000, 5_002]),  # as many events as the server takes (whoami: 20,000)
    (8, 12_000, [4_001, 4_001, 4_000]),  # 32,000 points each: about SEND_POINTS (40,000) at most, in equal parts
], ids=["one-key", "eight-keys"])
def test_a_backlog_leaves_in_batches_as_large_as_the_server_takes(server, tmp_path, api, monkeypatch, keys, steps,
                                                                   batches):
    """whoami names the server's largest batch (20,000 events): a backlog goes in batches that size, or
    in equal parts of about 40,000 points for many keys a step; every point is stored once."""
    from runcast.sender.transport import HttpTransport

    url, mine, _, _ = server
    sizes: list[int] = []
    send = HttpTransport.send

    def counted(self: HttpTransport, body: bytes, batch: list[dict[str, Any]], timeout: float) -> None:
        sizes.append(len(batch))
        send(self, body, batch, timeout)

    monkeypatch.setattr(HttpTransport, "send", counted)
    run = runcast.init(project=PROJECT, name="backlog", server=url, token=mine, dir=tmp_path / "spool",
                       flush_interval=60.0, max_queue=50_000, heartbeat_interval=3600, capture_code=False)
    names = [f"k{i}" for i in range(keys)]
    for step in range(steps):
        run.log(dict.fromkeys(names, 1.0 / (step + 1)), step=step)
    run.finish()
    assert sizes == batches  # run_started, the steps, finished
    stored = []
    for start in range(0, steps, 20_000):  # the raw points, 20,000 a read
        body = api.get(f"/runs/{run.id}/metrics", params={"key": "k0", "start": start, "end": start + 19_999,
                                                          "max_points": 20_000}).json()
        assert body["level"] == 0
        stored += body["series"][0]["step"]
    assert stored == list(range(steps))


def test_config_updates_mid_run_are_stored(server, tmp_path, api):
    url, mine, _, _ = server
    run = runcast.init(project=PROJECT, name="config", config={"lr": 3e-4, "opt": {"beta1": 0.9}}, server=url,
                       token=mine, dir=tmp_path / "spool")
    run.log({"loss": 1.0}, step=0)
    run.flush()
    run.config.update({"lr": 1e-4, "warmup": 100})
    run.config.batch_size = 64
    run.config = {"opt": {"beta1": 0.95}}
    with pytest.raises(TypeError):
        del run.config["lr"]
    with pytest.raises(ValueError):
        run.config["bad"] = {"x": "\ud800"}  # not storable text: refused here, nothing sent
    run.summary.update(final_loss=0.5)
    run.finish()
    body = api.get(f"/runs/{run.id}").json()
    assert body["config"] == {"lr": 1e-4, "opt": {"beta1": 0.95}, "warmup": 100, "batch_size": 64}
    assert dict(run.config) == body["config"]
    assert body["summary"] == {"final_loss": 0.5}


def test_resume_without_resume_step_continues_after_the_stored_last_step(server, tmp_path, api):
    url, mine, _, _ = server
    first = runcast.init(project=PROJECT, name="resumed", server=url, token=mine, dir=tmp_path / "spool")
    for _ in range(10):
        first.log({"loss": 1.0})  # steps 0..9
    first.finish("failed")
    again = runcast.init(project=PROJECT, server=url, token=mine, resume=first.id, dir=tmp_path / "spool")
    assert again.step == 9
    for _ in range(5):
        again.log({"loss": 2.0})  # steps 10..14
    again.finish()
    body = api.get(f"/runs/{first.id}").json()
    assert [(s["index"], s["start_step"], s["resumed"]) for s in body["segments"]] == [(0, 0, False), (1, 9, True)]
    assert [[step for step, _ in seg] for seg in points(api, first.id, "loss")] == [list(range(10)),
                                                                                   list(range(10, 15))]
    assert body["status"] == "finished" and body["last_step"] == 14
    with pytest.raises(InitError, match="exists already: pass resume="):
        runcast.init(project=PROJECT, server=url, token=mine, id=first.id, dir=tmp_path / "spool")


def test_tags_and_groups_filter_the_run_list(server, tmp_path, api, monkeypatch):
    url, mine, _, _ = server
    made: dict[str, str] = {}
    monkeypatch.setenv("RUNCAST_TAGS", "sweep-7, baseline")
    for name, group in (("a", "g-one"), ("b", "g-one"), ("c", "g-two")):
        with runcast.init(project=PROJECT, name=f"tagged-{name}", group=group, job_type="train", server=url,
                          token=mine, dir=tmp_path / "spool",
                          **({"tags": ["sweep-7", "lr-high"]} if name == "c" else {})) as run:
            run.log({"loss": 1.0})
        made[name] = run.id

    def listed(**params: str) -> list[str]:
        return sorted(r["name"] for r in api.get("/runs", params={"project": PROJECT, **params}).json()["runs"])

    assert listed(tag="sweep-7") == ["tagged-a", "tagged-b", "tagged-c"]
    assert listed(tag="baseline") == ["tagged-a", "tagged-b"]
    assert listed(tag="lr-high") == ["tagged-c"]
    assert listed(group="g-one") == ["tagged-a", "tagged-b"]
    assert listed(group="g-one", tag="lr-high") == []
    summary = next(r for r in api.get("/runs", params={"tag": "lr-high"}).json()["runs"])
    assert (summary["tags"], summary["group"], summary["job_type"]) == (["lr-high", "sweep-7"], "g-two", "train")
    for bad in ({"tag": ""}, {"tag": "a\x00b"}, {"group": "x" * 129}):
        res = api.get("/runs", params=bad)
        assert res.status_code == 422 and res.json()["error"]["field"] in ("tag", "group")


def test_module_level_run_is_set_by_init_and_cleared_by_finish(server, tmp_path, api):
    url, mine, _, _ = server
    runcast.finish()  # whatever an earlier test left
    assert runcast.run is None
    with pytest.raises(RuntimeError, match=r"call runcast.init"):
        runcast.log({"loss": 1.0})
    run = runcast.init(project=PROJECT, name="module-level", server=url, token=mine, dir=tmp_path / "spool")
    assert runcast.run is run
    for step in range(5):
        runcast.log({"loss": float(step)})
    runcast.finish()
    assert runcast.run is None and run.finished
    assert points(api, run.id, "loss") == [[(s, float(s)) for s in range(5)]]


def test_a_revoked_token_raises_at_init(server, tmp_path):
    import sqlite3
    import subprocess

    url, _, _, env = server
    res = subprocess.run([str(services.BIN / "runcast"), "token", "create", "--project", PROJECT],
                         env=services.child_env(env), capture_output=True, text=True, timeout=120, check=True)
    token = res.stdout.strip().splitlines()[-1]
    assert "stored in sqlite:///" in res.stderr and env["RUNCAST_DATA_DIR"] in res.stderr
    with runcast.init(project=PROJECT, server=url, token=token, dir=tmp_path / "spool") as run:
        run.log({"loss": 1.0})
    with sqlite3.connect(Path(env["RUNCAST_DATA_DIR"]) / "runcast.db") as db:
        db.execute("UPDATE ingest_tokens SET revoked_at = 1 WHERE prefix = ?", (token[:10],))
    began = time.monotonic()
    with pytest.raises(InitError, match="invalid or revoked"):
        runcast.init(project=PROJECT, server=url, token=token, dir=tmp_path / "spool")
    assert time.monotonic() - began < 5


def test_environment_variables_name_the_run(server, tmp_path, api, monkeypatch):
    url, mine, _, _ = server
    monkeypatch.setenv("RUNCAST_SERVER", url)
    monkeypatch.setenv("RUNCAST_TOKEN", mine)
    monkeypatch.setenv("RUNCAST_PROJECT", "other")
    with pytest.raises(InitError, match="the token is for project 'idioms', not 'other'"):
        runcast.init(dir=tmp_path / "spool")
    monkeypatch.setenv("RUNCAST_PROJECT", PROJECT)
    monkeypatch.setenv("RUNCAST_NAME", "from-env")
    monkeypatch.setenv("RUNCAST_GROUP", "env-group")
    with runcast.init(dir=tmp_path / "spool") as run:
        run.log({"loss": 1.0})
    body = api.get(f"/runs/{run.id}").json()
    assert (body["project"], body["name"], body["group"]) == (PROJECT, "from-env", "env-group")
    monkeypatch.setenv("RUNCAST_MODE", "offline")
    with runcast.init(dir=tmp_path / "offline") as offline:
        offline.log({"loss": 1.0})
    assert offline.url is None and offline.stats.sent == 0
    assert api.get(f"/runs/{offline.id}").status_code == 404
    monkeypatch.setenv("RUNCAST_MODE", "sideways")
    with pytest.raises(ValueError, match="mode must be one of online, offline, disabled"):
        runcast.init(dir=tmp_path / "spool")
