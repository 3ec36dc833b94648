"""How ``runcast import`` recognises a source's format (``--format`` skips this)."""

from __future__ import annotations

import json
import math

import pytest
from runcast.importers import ImportFailed, detect
from runcast.importers.model import RunBuilder
from torch.utils.tensorboard import SummaryWriter


def test_files_by_name_and_first_line(tmp_path):
    cases = {
        "run.jsonl": '{"step": 1, "loss": 2.0}\n',
        "export.jsonl": '{"segment":0,"key":"loss","step":1,"value":2.0}\n',
        "export.csv": "segment,key,step,value\n0,loss,1,2.0\n",
        "chart.csv": '"Step","run-1 - loss","run-1 - loss__MIN","run-1 - loss__MAX"\n1,2,2,2\n',
        "log.csv": "step,loss,segment\n1,2.0,a\n",
        "log.txt": '{"step": 1}\n',
        "run-abc.wandb": ":W&B\x00",
    }
    for name, text in cases.items():
        (tmp_path / name).write_text(text)
    sqlite = tmp_path / "store.db"
    sqlite.write_bytes(b"SQLite format 3\x00" + bytes(100))
    assert {name: detect(str(tmp_path / name)) for name in cases} == {
        "run.jsonl": "log", "export.jsonl": "runcast", "export.csv": "runcast", "chart.csv": "wandb-csv",
        "log.csv": "log", "log.txt": "log", "run-abc.wandb": "wandb",
    }
    assert detect(str(sqlite)) == "mlflow"
    assert detect("http://mlflow.internal:5000") == "mlflow" and detect("sqlite:///x.db") == "mlflow"


def test_directories_by_what_they_hold(tmp_path):
    with SummaryWriter(str(tmp_path / "tb" / "run")) as w:
        w.add_scalar("x", 1.0, 0)
    (tmp_path / "wandb" / "offline-run-1-abc").mkdir(parents=True)
    (tmp_path / "wandb" / "offline-run-1-abc" / "run-abc.wandb").write_bytes(b"x")
    (tmp_path / "mlruns" / "0").mkdir(parents=True)
    (tmp_path / "mlruns" / "0" / "meta.yaml").write_text("name: Default\n")
    assert detect(str(tmp_path / "tb")) == "tensorboard"
    assert detect(str(tmp_path / "wandb")) == "wandb"
    assert detect(str(tmp_path / "mlruns")) == "mlflow"
    with pytest.raises(ImportFailed, match="holds tensorboard and wandb data: say which with --format"):
        detect(str(tmp_path))
    (tmp_path / "nothing").mkdir()
    with pytest.raises(ImportFailed, match="no TensorBoard, W&B or MLflow data here"):
        detect(str(tmp_path / "nothing"))
    with pytest.raises(ImportFailed, match="no such file or directory"):
        detect(str(tmp_path / "absent"))
    binary = tmp_path / "blob.bin"
    binary.write_bytes(bytes(range(256)))
    with pytest.raises(ImportFailed, match="not a format runcast import reads"):
        detect(str(binary))


def test_the_segment_rule():
    b = RunBuilder()
    for step in (1, 2, 3):
        b.add("loss", step, float(step), 100.0 + step)
    b.add("loss", 3, 9.0)  # a repeat: the first value stays
    b.add("lr", 1, 0.1)  # another metric's steps are its own
    b.add("loss", 2, 2.5)  # back in steps: the job restarted
    b.add("lr", 2, 0.2)
    run = b.build(format="log", identity="x", name="x")
    assert run.repeats == 1
    assert [{k: list(s.steps) for k, s in seg.series.items()} for seg in run.segments] == [
        {"loss": [1, 2, 3], "lr": [1]}, {"loss": [2], "lr": [2]}]
    assert run.segments[0].time_range() == (101.0, 103.0) and math.isnan(run.segments[1].series["loss"].times[0])
    with pytest.raises(ValueError, match="step -1 of 'loss' is not an integer"):
        b.add("loss", -1, 0.0)
    with pytest.raises(ValueError, match="control characters"):
        b.add("bad\nname", 1, 0.0)
    assert json.dumps(run.env) == "{}"
