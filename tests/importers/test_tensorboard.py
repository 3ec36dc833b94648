"""TensorBoard: event files written by torch's SummaryWriter and tensorboard's own writer, imported and read back."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from runcast import importers
from runcast_server.record.models import Run, RunVersion
from sqlalchemy import func, select
from tensorboard.backend.event_processing import event_accumulator
from torch.utils.tensorboard import SummaryWriter

T0 = 1_700_000_000.0


def f32(x: float) -> float:
    """What a SummaryWriter stores for ``x`` (simple_value is a float32)."""
    return float(np.float32(x))


def write_run(logdir: Path, steps: range, *, offset: float = 0.0, hparams: dict | None = None) -> None:
    with SummaryWriter(str(logdir)) as w:
        for s in steps:
            w.add_scalar("train/loss", 3.0 / (1 + s), s, walltime=T0 + offset + s)
            if s % 10 == 0:
                w.add_scalar("lr", 1e-3 * (1 + s / 100), s, walltime=T0 + offset + s + 0.5)
        if hparams is not None:
            w.add_hparams(hparams, {"hparam/final_loss": 0.25})


def accumulated(run_dir: Path) -> dict[str, list[tuple[int, float, float]]]:
    """Every scalar as TensorBoard's EventAccumulator reads it: tag -> [(step, value, wall time)]."""
    acc = event_accumulator.EventAccumulator(str(run_dir), size_guidance={event_accumulator.SCALARS: 0})
    acc.Reload()
    return {tag: [(e.step, e.value, e.wall_time) for e in acc.Scalars(tag)] for tag in acc.Tags()["scalars"]}


def test_logdir_with_two_runs_hparams_and_times(hub, tmp_path):
    logdir = tmp_path / "tb"
    write_run(logdir / "baseline", range(200), hparams={"lr": 1e-3, "optimizer": "adam", "layers": 4, "tied": True})
    write_run(logdir / "wide", range(50), offset=1000)

    plans = hub.load([logdir])

    assert sorted(p.name for p in plans) == ["baseline", "wide"]
    base = next(p for p in plans if p.name == "baseline")
    run = hub.run(base.run_id)
    assert run["config"] == {"layers": 4.0, "lr": 1e-3, "optimizer": "adam", "tied": 1.0}
    assert run["status"] == "finished" and run["visibility"] == "public"
    assert run["env"]["imported_from"] == {"format": "tensorboard", "run": "baseline"}
    (hparams_dir,) = [d for d in (logdir / "baseline").iterdir() if d.is_dir()]
    (final,) = accumulated(hparams_dir)["hparam/final_loss"]  # add_hparams writes it now, at step 0
    assert run["started_at"] == T0 and run["finished_at"] == final[2]
    assert len(run["segments"]) == 1

    stored = hub.points(base.run_id)
    expected = accumulated(logdir / "baseline")
    assert stored[(0, "train/loss")] == [(s, f32(3.0 / (1 + s))) for s in range(200)]
    assert stored[(0, "lr")] == [(s, v) for s, v, _ in expected["lr"]]
    assert stored[(0, "hparam/final_loss")] == [(0, 0.25)]
    assert "time/elapsed_s" not in hub.run(base.run_id)["keys"]
    times = hub.times(base.run_id)  # TensorBoard's wall_time: each step's time on the server
    assert [times[(0, s)] for s in range(200)] == [T0 + s for s in range(200)]
    assert sum(len(v) for v in stored.values()) == 200 + 20 + 1 == base.run.points


def test_a_restart_in_the_same_directory_is_a_new_segment(hub, tmp_path):
    logdir = tmp_path / "tb" / "run"
    write_run(logdir, range(120))
    write_run(logdir, range(100, 150), offset=500)  # resumed from the checkpoint at step 99

    (plan,) = hub.load([tmp_path / "tb"])

    run = hub.run(plan.run_id)
    assert [(s["index"], s["start_step"], s["resumed"]) for s in run["segments"]] == [(0, 0, False), (1, 99, True)]
    stored = hub.points(plan.run_id)
    assert [s for s, _ in stored[(0, "train/loss")]] == list(range(120))
    assert [s for s, _ in stored[(1, "train/loss")]] == list(range(100, 150))
    assert stored[(1, "train/loss")][0] == (100, f32(3.0 / 101))
    assert run["last_step"] == 149 and run["finished_at"] == T0 + 500 + 149


def test_tensor_scalars_of_tensorboards_own_writer(hub, tmp_path):
    from tensorboard.summary import Writer

    writer = Writer(str(tmp_path / "tf2" / "run"))
    for s in range(30):
        writer.add_scalar("loss", 2.0 - s / 100, step=s, wall_time=T0 + s)
        writer.add_scalar("accuracy", np.float64(s / 30), step=s, wall_time=T0 + s)
    writer.close()

    (plan,) = hub.load([tmp_path / "tf2"])

    stored = hub.points(plan.run_id)
    assert stored[(0, "loss")] == [(s, f32(2.0 - s / 100)) for s in range(30)]
    assert stored[(0, "accuracy")] == [(s, f32(s / 30)) for s in range(30)]


def test_values_equal_tensorboards_reader(hub, tmp_path):
    run_dir = tmp_path / "tb" / "r"
    with SummaryWriter(str(run_dir)) as w:
        for s in range(0, 3000, 3):
            w.add_scalar("a/loss", math.sin(s) * 10, s)
            w.add_scalar("b", float("nan") if s == 30 else math.inf if s == 60 else s * 1e-7, s)
    (plan,) = hub.load([run_dir])
    stored = hub.points(plan.run_id)
    for tag, points in accumulated(run_dir).items():
        got = stored[(0, tag)]
        assert [s for s, _ in got] == [s for s, _, _ in points]
        assert all(a == b or (math.isnan(a) and math.isnan(b)) for (_, a), (_, b, _) in zip(got, points))


def test_a_cut_off_event_file_is_refused_and_nothing_is_sent(hub, tmp_path):
    good = tmp_path / "tb" / "good"
    write_run(good, range(100))
    bad = tmp_path / "tb" / "bad"
    write_run(bad, range(100))
    (event_file,) = bad.iterdir()
    data = event_file.read_bytes()
    event_file.write_bytes(data[: len(data) - 7])

    with pytest.raises(importers.ImportFailed) as caught:
        hub.load([tmp_path / "tb"])

    assert str(event_file) in str(caught.value) and "(record 111)" in str(caught.value)  # version record + 100 + 10 scalars: the last one
    assert "cut off" in str(caught.value)
    assert hub.runs() == []


def test_importing_twice_changes_nothing(db: Any, hub, tmp_path):
    write_run(tmp_path / "tb" / "r", range(300))
    (plan,) = hub.load([tmp_path / "tb"])
    before = (hub.run(plan.run_id), hub.export(plan.run_id), hub.events(plan.run_id), version(db, plan.run_id))

    (again,) = hub.load([tmp_path / "tb"])

    after = (hub.run(plan.run_id), hub.export(plan.run_id), hub.events(plan.run_id), version(db, plan.run_id))
    assert again.run_id == plan.run_id
    for state in (before[0], after[0]):
        state.pop("heartbeat_at"), state.pop("heartbeat_age_s")  # the server's clock: each batch touches it
    assert after == before
    assert len(hub.runs()) == 1


def version(db: Any, run_id: str) -> tuple[int, int]:
    """The run's version and its count of run_versions rows (each stored batch that changed it adds one)."""
    with db.scope() as session:
        run = session.get(Run, run_id)
        assert run is not None
        return run.version, session.scalar(select(func.count()).where(RunVersion.run_id == run_id))
