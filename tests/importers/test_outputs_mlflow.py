"""MLflow text and image artifacts (``log_text``, ``log_image`` with a key and step or a file name) logged with
MlflowClient into an SQLite store with local artifacts, imported as samples and media."""

from __future__ import annotations

import hashlib
import io
from pathlib import Path

import numpy as np
import pytest
from mlflow import MlflowClient
from outputs_core import needs_outputs_core
from PIL import Image as PILImage
from runcast.importers.mlflow_artifacts import step_and_name

T0_MS = 1_700_000_000_000
STORIES = {100: "Once upon a time", 200: "Once upon a time, a tiny GPT", 300: "Once upon a time, a tiny GPT wrote"}


def image(step: int) -> np.ndarray:
    pixels = np.zeros((4, 6, 3), dtype=np.uint8)
    pixels[:, : step // 100, 1] = 200
    return pixels


def log_run(tmp_path: Path) -> tuple[str, str]:
    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    client = MlflowClient(tracking_uri=uri)
    experiment = client.create_experiment("gen", artifact_location=(tmp_path / "artifacts").as_uri())
    run = client.create_run(experiment, run_name="generations", start_time=T0_MS).info.run_id
    for step, story in STORIES.items():
        client.log_metric(run, "loss", 1000 / step, timestamp=T0_MS + step * 1000, step=step)
        client.log_text(run, story, f"samples/step_{step}/story.txt")
        client.log_image(run, image(step), key="gen/grid", step=step, timestamp=T0_MS + step * 1000 + 5)
    client.log_image(run, image(300), "final/picture.png")  # a file name, no step
    client.log_text(run, "{\"not\": \"a sample\"}", "config.json")
    client.set_terminated(run, "FINISHED")
    return run, str(tmp_path / "mlflow.db")


def test_text_and_images(hub, tmp_path):
    run, db = log_run(tmp_path)
    (plan,) = hub.load([db])
    sent = hub.outputs(plan)
    samples = [e for e in sent if e["type"] == "sample"]
    assert [(e["step"], e["key"], e["prompt_id"], e["output"]) for e in samples] == [
        (step, "samples", "samples/step/story.txt", story) for step, story in STORIES.items()]
    images = [e for e in sent if e["type"] == "media"]
    client = MlflowClient(tracking_uri=f"sqlite:///{db}")
    keyed = sorted(i.path for i in client.list_artifacts(run, "images") if not i.path.endswith(".webp"))
    stored = [Path(client.download_artifacts(run, p, str(tmp_path / "dl"))).read_bytes() for p in keyed]
    assert [(e["key"], e["step"], e["blob"], e["width"], e["height"]) for e in images] == [
        ("final/picture", 0, hashlib.sha256(Path(client.download_artifacts(run, "final/picture.png", str(tmp_path / "dl")))
                                            .read_bytes()).hexdigest(), 6, 4),
        *[("gen/grid", step, hashlib.sha256(data).hexdigest(), 6, 4) for step, data in zip(STORIES, stored)],
    ]
    by_step = {e["step"]: e for e in sent if e.get("key") == "gen/grid"}
    assert {s: np.asarray(PILImage.open(io.BytesIO(d))).tolist() for s, d in zip(STORIES, stored)} == {
        s: image(s).tolist() for s in STORIES}  # MLflow wrote the pixels logged: what was uploaded is them
    assert sorted(hub.blobs.put) == sorted({e["blob"] for e in images}) and len(by_step) == 3
    points = hub.points(plan.run_id)
    assert points[(0, "loss")] == [(s, 1000 / s) for s in STORIES]


@pytest.mark.parametrize(("path", "step", "name"), [
    ("samples/step_100/story.txt", 100, "samples/step/story.txt"),
    ("gen/Step-7.png", 7, "gen/step.png"),
    ("eval/step=20/step30_p.md", 30, "eval/step=20/step_p.md"),
    ("notes.txt", 0, "notes.txt"),
])
def test_the_step_of_an_artifact_path(path, step, name):
    assert step_and_name(path) == (step, name)


@needs_outputs_core
def test_round_trip_what_the_server_holds(hub, tmp_path):
    run, db = log_run(tmp_path)
    (plan,) = hub.load([db])
    samples = hub.held(plan.run_id, "samples")
    assert [(s["step"], s["prompt_id"], s["output"]) for s in samples] == [
        (step, "samples/step/story.txt", story) for step, story in STORIES.items()]
    media = [m for m in hub.held(plan.run_id, "media") if m["key"] == "gen/grid"]
    assert [np.asarray(PILImage.open(io.BytesIO(hub.image(plan.run_id, m)))).tolist() for m in media] == [
        image(s).tolist() for s in STORIES]
