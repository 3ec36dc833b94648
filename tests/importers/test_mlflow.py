"""MLflow: runs logged with MlflowClient into a file store, an SQLite store and a tracking server, imported."""

from __future__ import annotations

import math
import os
import subprocess
import time

import pytest
import services
from mlflow import MlflowClient
from mlflow.entities import Metric, Param, RunTag
from runcast import importers

T0 = 1_700_000_000.0
MS = int(T0 * 1000)


def log_runs(uri: str) -> dict[str, str]:
    """Two runs in experiment 'pretrain' (one failed, one with a step-less metric) and one in 'other'."""
    client = MlflowClient(tracking_uri=uri)
    pretrain = client.create_experiment("pretrain")
    base = client.create_run(pretrain, run_name="baseline", tags={"team": "nlp"}, start_time=MS).info.run_id
    metrics = [Metric("train/loss", 3.0 / (1 + s), MS + 1000 * s, s) for s in range(500)]
    metrics += [Metric("val/loss", math.nan if s == 200 else 2.5 - s / 1000, MS + 1000 * s + 500, s) for s in range(0, 500, 100)]
    for start in range(0, len(metrics), 1000):
        client.log_batch(base, metrics=metrics[start : start + 1000])
    client.log_batch(base, params=[Param("lr", "0.001"), Param("layers", "4")],
                     tags=[RunTag("stage", "1"), RunTag("sweep", ""), RunTag("grid", "lr,bs"),
                           RunTag("mlflow.note.content", "first try")])
    client.set_terminated(base, "FAILED", end_time=MS + 600_000)
    stepless = client.create_run(pretrain, run_name="probe", start_time=MS + 10**6).info.run_id
    for n in range(3):
        client.log_metric(stepless, "accuracy", 0.5 + n / 10, timestamp=MS + 10**6 + n * 1000)  # step 0 each time
    client.set_terminated(stepless, "FINISHED")
    other = client.create_experiment("other")
    elsewhere = client.create_run(other, run_name="elsewhere").info.run_id
    client.log_metric(elsewhere, "x", 1.0, step=1)
    client.set_terminated(elsewhere, "FINISHED")
    return {"baseline": base, "probe": stepless, "elsewhere": elsewhere}


def check_baseline(hub, plans, ids):
    base = next(p for p in plans if p.name == "baseline")
    run = hub.run(base.run_id)
    assert run["config"] == {"layers": "4", "lr": "0.001"}
    # tags are the run's, key:value (the runs list finds them); one with a comma stays in env; the description: notes
    assert run["tags"] == ["stage:1", "sweep", "team:nlp"] and run["env"]["tags"] == {"grid": "lr,bs"}
    found = hub.client.get("/api/v1/runs", params={"tag": "team:nlp"}, headers=hub.auth()).json()["runs"]
    assert [r["id"] for r in found] == [base.run_id]
    assert run["notes"] == "first try"
    assert run["env"]["imported_from"] == {"format": "mlflow", "run_id": ids["baseline"], "experiment": "pretrain"}
    assert run["status"] == "failed"
    assert run["started_at"] == T0 and run["finished_at"] == T0 + 499
    stored = hub.points(base.run_id)
    assert stored[(0, "train/loss")] == [(s, 3.0 / (1 + s)) for s in range(500)]
    val = stored[(0, "val/loss")]
    assert [s for s, _ in val] == [0, 100, 200, 300, 400] and math.isnan(val[2][1]) and val[3] == (300, 2.2)
    assert (0, "time/elapsed_s") not in stored
    # MLflow's per-point timestamps are the steps' times on the server too (one a second: each its own)
    times = hub.times(base.run_id)
    assert [times[(0, s)] for s in range(500)] == [T0 + s for s in range(500)]


def test_sqlite_store_all_runs(hub, tmp_path):
    db = tmp_path / "mlflow.db"
    ids = log_runs(f"sqlite:///{db}")

    plans = hub.load([db])

    assert sorted(p.name for p in plans) == ["baseline", "elsewhere", "probe"]
    check_baseline(hub, plans, ids)
    probe = next(p for p in plans if p.name == "probe")
    assert hub.points(probe.run_id)[(0, "accuracy")] == [(0, 0.5), (1, 0.6), (2, 0.7)]  # step-less: numbered in time order
    assert hub.run(probe.run_id)["status"] == "finished"


def test_file_store_one_experiment_and_the_same_ids_as_from_the_database(hub, tmp_path, monkeypatch):
    monkeypatch.setenv("MLFLOW_ALLOW_FILE_STORE", "true")  # MLflow 3 writes a file store only when told
    store = tmp_path / "mlruns"
    ids = log_runs(store.as_uri())
    monkeypatch.delenv("MLFLOW_ALLOW_FILE_STORE")

    plans = hub.load([store], options=importers.ReadOptions(experiments=("pretrain",)))

    assert sorted(p.name for p in plans) == ["baseline", "probe"]
    check_baseline(hub, plans, ids)
    assert "MLFLOW_ALLOW_FILE_STORE" not in os.environ
    # the identity is MLflow's run id: the same run read from another store is the same Runcast run
    assert importers.plan.run_id("demo", plans[0].run) == plans[0].run_id


def test_unknown_experiment_is_named(hub, tmp_path, monkeypatch):
    monkeypatch.setenv("MLFLOW_ALLOW_FILE_STORE", "true")
    log_runs((tmp_path / "mlruns").as_uri())
    with pytest.raises(importers.ImportFailed, match="no active experiment named 'nope'"):
        hub.load([tmp_path / "mlruns"], options=importers.ReadOptions(experiments=("pretrain", "nope")))
    assert hub.runs() == []


def test_a_store_without_metrics_is_an_error(hub, tmp_path, monkeypatch):
    monkeypatch.setenv("MLFLOW_ALLOW_FILE_STORE", "true")
    client = MlflowClient(tracking_uri=(tmp_path / "mlruns").as_uri())
    run = client.create_run(client.create_experiment("e"), run_name="params only").info.run_id
    client.log_param(run, "lr", "0.1")
    with pytest.raises(importers.ImportFailed, match="no metric points to import"):
        hub.load([tmp_path / "mlruns"])


def test_a_damaged_store_names_the_file_and_line(hub, tmp_path, monkeypatch):
    monkeypatch.setenv("MLFLOW_ALLOW_FILE_STORE", "true")
    store = tmp_path / "mlruns"
    ids = log_runs(store.as_uri())
    monkeypatch.delenv("MLFLOW_ALLOW_FILE_STORE")
    (metric,) = store.glob(f"*/{ids['baseline']}/metrics/train/loss")
    lines = metric.read_text().splitlines(keepends=True)
    lines[41] = "1700000041000 0.07x 41\n"
    metric.write_text("".join(lines))

    with pytest.raises(importers.ImportFailed) as caught:
        hub.load([store])

    assert str(caught.value).startswith(f"{metric}:42: MLflow cannot read this store (ValueError: ")
    assert hub.runs() == []

    damaged = tmp_path / "mlflow.db"
    damaged.write_bytes(b"SQLite format 3\x00" + b"\x00" * 100)
    with pytest.raises(importers.ImportFailed, match=r"mlflow\.db: MLflow cannot read this store \(DatabaseError: "):
        hub.load([damaged])
    assert hub.runs() == []


@pytest.mark.slow
def test_tracking_server(hub, tmp_path):
    port = services.free_port()
    url = f"http://127.0.0.1:{port}"
    with open(tmp_path / "mlflow-server.log", "w") as log:
        proc = subprocess.Popen(
            [str(services.BIN / "mlflow"), "server", "--backend-store-uri", f"sqlite:///{tmp_path / 'server.db'}",
             "--default-artifact-root", str(tmp_path / "artifacts"), "--host", "127.0.0.1", "--port", str(port),
             "--workers", "1"],
            stdout=log, stderr=subprocess.STDOUT, env=services.child_env({}), start_new_session=True,
        )
        try:
            services.wait_until(lambda: _up(url), 180, f"mlflow server at {url} (log {log.name})", interval=0.5)
            ids = log_runs(url)

            plans = hub.load([url], options=importers.ReadOptions(experiments=("pretrain",)))

            check_baseline(hub, plans, ids)
            assert "127.0.0.1" not in str(hub.run(plans[0].run_id))  # the server's address is not published
        finally:
            os.killpg(proc.pid, 15)
            proc.wait(timeout=30)


def _up(url: str) -> bool:
    import httpx

    try:
        return httpx.get(f"{url}/health", timeout=2).status_code == 200
    except httpx.HTTPError:
        time.sleep(0.5)
        return False


def test_a_tracking_server_that_does_not_answer(hub):
    url = f"http://127.0.0.1:{services.free_port()}"
    with pytest.raises(importers.ImportFailed, match=f"{url}: the MLflow tracking server does not answer"):
        hub.load([url])
