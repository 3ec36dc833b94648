"""W&B tables, images and histograms of an offline run written by the real ``wandb`` package, imported as media."""

from __future__ import annotations

import hashlib
import io
import json
from pathlib import Path

import numpy as np
import pytest
from outputs_core import needs_outputs_core
from PIL import Image as PILImage

from importers.tools import run_python

MEDIA_RUN = """
import numpy as np, wandb
run = wandb.init(project="vision", name="media", config={"lr": 1e-3})
for s in range(3):
    img = np.zeros((6, 10, 3), dtype=np.uint8)
    img[:, : s + 1, 0] = 255
    run.log({"loss": 1.0 / (s + 1), "gen/sample": wandb.Image(img, caption=f"step {s}"),
             "weights": wandb.Histogram(np.arange(20.0) * (s + 1), num_bins=8),
             "val/table": wandb.Table(columns=["prompt", "output", "score"],
                                      data=[["a", f"x{s}", 0.5 + s], ["b", None, 1.5]]),
             "grid": [wandb.Image(img), wandb.Image(img[:, ::-1])]}, step=s * 10)
run.finish()
"""


@pytest.fixture(scope="module")
def media_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("wandb-media")
    run_python(MEDIA_RUN, root, WANDB_MODE="offline", WANDB_SILENT="true", WANDB_DIR=str(root),
               WANDB_DISABLE_GIT="true", WANDB_API_KEY="")
    (run_dir,) = (root / "wandb").glob("offline-run-*")
    return run_dir


def history(run_dir: Path) -> list[dict]:
    """The history rows as W&B's own reader prints them (``wandb leet inspect --json``)."""
    import subprocess

    from wandb.util import get_core_path

    (log,) = run_dir.glob("*.wandb")
    out = subprocess.run([str(get_core_path()), "leet", "inspect", "--no-observability", "--json", "--run-file", str(log),
                          str(run_dir.parent)], capture_output=True, text=True, check=True,
                         env={"WANDB_MODE": "offline", "PATH": "/usr/bin:/bin"}).stdout
    return [r["history"]["item"] for r in map(json.loads, out.splitlines()) if r.get("type") == "history"]


def test_images_tables_and_histograms(hub, media_run):
    (plan,) = hub.load([media_run])
    rows = history(media_run)
    files = media_run / "files"
    sent = hub.outputs(plan)
    by_key: dict[str, list[dict]] = {}
    for e in sent:
        by_key.setdefault(e["key"], []).append(e)
    assert sorted(by_key) == ["gen/sample", "grid/0", "grid/1", "val/table", "weights"]

    assert [(e["step"], e["blob"], e["width"], e["height"], e["size"], e["caption"]) for e in by_key["gen/sample"]] == [
        (r["_step"], r["gen/sample.sha256"], 10, 6, r["gen/sample.size"], r["gen/sample.caption"]) for r in rows]
    assert [e["blob"] for e in by_key["gen/sample"]] == [
        hashlib.sha256((files / r["gen/sample.path"]).read_bytes()).hexdigest() for r in rows]
    assert [(e["step"], e["blob"]) for e in by_key["grid/1"]] == [
        (r["_step"], hashlib.sha256((files / r["grid.filenames"][1]).read_bytes()).hexdigest()) for r in rows]
    assert [(e["step"], e["columns"], e["rows"]) for e in by_key["val/table"]] == [
        (r["_step"], ["prompt", "output", "score"], json.loads((files / r["val/table.path"]).read_text())["data"])
        for r in rows]
    assert by_key["val/table"][0]["rows"] == [["a", "x0", 0.5], ["b", None, 1.5]]
    for e, r in zip(by_key["weights"], rows):
        counts, edges = np.histogram(np.arange(20.0) * (r["_step"] // 10 + 1), bins=8)
        assert (e["edges"], e["counts"]) == (r["weights.bins"], r["weights.values"])
        assert np.allclose(e["edges"], edges) and e["counts"] == counts.tolist()
    # the media's fields (width, size, nrows, ...) are not metrics
    assert {key for _, key in hub.points(plan.run_id)} == {"loss"}
    assert sorted(hub.blobs.put) == sorted({e["blob"] for e in sent if e["kind"] == "image"})


def test_a_missing_media_file_is_named(hub, media_run, tmp_path):
    import shutil

    from runcast import importers

    copy = tmp_path / "wandb" / media_run.name
    shutil.copytree(media_run, copy)
    gone = sorted((copy / "files" / "media" / "table").rglob("*.table.json"))[0]
    gone.unlink()
    with pytest.raises(importers.ImportFailed, match=f"the run's file {gone} is missing"):
        hub.load([tmp_path / "wandb"])
    assert hub.runs() == []


@needs_outputs_core
def test_round_trip_what_the_server_holds(hub, media_run):
    (plan,) = hub.load([media_run])
    rows = history(media_run)
    files = media_run / "files"
    media = hub.held(plan.run_id, "media")
    images = [m for m in media if m["key"] == "gen/sample"]
    assert [hub.image(plan.run_id, m) for m in images] == [(files / r["gen/sample.path"]).read_bytes() for r in rows]
    assert [PILImage.open(io.BytesIO(hub.image(plan.run_id, m))).size for m in images] == [(10, 6)] * 3
    assert [(m["step"], m["columns"], m["rows"]) for m in media if m["key"] == "val/table"] == [
        (r["_step"], ["prompt", "output", "score"], json.loads((files / r["val/table.path"]).read_text())["data"])
        for r in rows]
    assert [(m["edges"], m["counts"]) for m in media if m["key"] == "weights"] == [
        (r["weights.bins"], r["weights.values"]) for r in rows]
