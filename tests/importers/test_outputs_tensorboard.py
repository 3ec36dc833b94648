"""TensorBoard text, images and histograms (torch's SummaryWriter; tensorboard's own tf-free protos for the TF2
forms) imported as samples and media, compared with what TensorBoard's reader holds."""

from __future__ import annotations

import hashlib
import io
import math
from pathlib import Path

import numpy as np
import pytest
from outputs_core import needs_outputs_core
from PIL import Image as PILImage
from tensorboard.backend.event_processing import event_accumulator
from tensorboard.compat.proto import event_pb2, summary_pb2
from tensorboard.plugins.histogram.summary_v2 import histogram_pb
from tensorboard.plugins.image import metadata as image_metadata
from tensorboard.plugins.text.summary_v2 import text_pb
from tensorboard.summary.writer.event_file_writer import EventFileWriter
from tensorboard.util import tensor_util
from torch.utils.tensorboard import SummaryWriter

T0 = 1_700_000_000.0
TEXTS = {0: "Once upon a time there", 100: "Once upon a time, a tiny GPT\nwrote ünïcode", 200: "The end."}


def torch_run(logdir: Path) -> dict[int, np.ndarray]:
    """Losses, texts, an image and a histogram per step, as a training script writes them."""
    rng = np.random.default_rng(0)
    weights = {}
    with SummaryWriter(str(logdir)) as w:
        for step, text in TEXTS.items():
            w.add_scalar("train/loss", 3.0 / (1 + step), step, walltime=T0 + step)
            w.add_text("generations/story", text, step, walltime=T0 + step + 0.1)
            image = np.zeros((3, 8, 12), dtype=np.uint8)
            image[0, :, : step // 20 + 1] = 255
            w.add_image("gen/grid", image, step, walltime=T0 + step + 0.2)
            weights[step] = rng.normal(size=1000) * (1 + step / 100)
            w.add_histogram("weights/w0", weights[step], step, bins=32, walltime=T0 + step + 0.3)
    return weights


def reader(run_dir: Path) -> event_accumulator.EventAccumulator:
    acc = event_accumulator.EventAccumulator(str(run_dir), size_guidance={k: 0 for k in (
        event_accumulator.IMAGES, event_accumulator.HISTOGRAMS, event_accumulator.TENSORS)})
    acc.Reload()
    return acc


def test_text_images_and_histograms_of_summary_writer(hub, tmp_path):
    torch_run(tmp_path / "tb" / "run")
    (plan,) = hub.load([tmp_path / "tb"])

    acc = reader(tmp_path / "tb" / "run")
    sid = plan.started[0]["segment"]
    sent = hub.outputs(plan)
    samples = [e for e in sent if e["type"] == "sample"]
    tag = "generations/story/text_summary"  # the tag torch writes for add_text("generations/story"), as TensorBoard shows it
    assert [(e["step"], e["key"], e["prompt_id"], e["prompt"], e["output"]) for e in samples] == [
        (step, "samples", tag, tag, text) for step, text in TEXTS.items()]
    images = [e for e in sent if e.get("kind") == "image"]
    held = {e.step: e.encoded_image_string for e in acc.Images("gen/grid")}
    assert [(e["step"], e["key"], e["blob"], e["content_type"], e["width"], e["height"], e["size"]) for e in images] \
        == [(s, "gen/grid", hashlib.sha256(held[s]).hexdigest(), "image/png", 12, 8, len(held[s])) for s in TEXTS]
    assert sorted(hub.blobs.put) == sorted(hashlib.sha256(b).hexdigest() for b in held.values())
    histograms = [e for e in sent if e.get("kind") == "histogram"]
    tb = {e.step: e.histogram_value for e in acc.Histograms("weights/w0")}
    # torch writes each bin's right edge and a first, empty bin: the edges are its limits, the counts its counts less that bin
    assert [(e["step"], e["edges"], e["counts"]) for e in histograms] == [
        (s, list(tb[s].bucket_limit), list(tb[s].bucket[1:])) for s in TEXTS]
    assert all(e["segment"] == sid and e["run"] == plan.run_id for e in sent)
    seqs = [e["seq"] for e in sent]
    assert seqs == sorted(seqs) and len(set(seqs)) == 9


def test_histograms_equal_numpys_bins(hub, tmp_path):
    weights = torch_run(tmp_path / "tb" / "run")
    (plan,) = hub.load([tmp_path / "tb"])
    for event in (e for e in hub.outputs(plan) if e.get("kind") == "histogram"):
        counts, edges = np.histogram(weights[event["step"]], bins=32)
        used = np.flatnonzero(counts)
        assert event["counts"] == counts[used[0] : used[-1] + 1].astype(float).tolist()
        assert event["edges"] == edges[used[0] : used[-1] + 2].tolist()


def test_tensorflows_bins_of_a_wide_range_are_merged_to_512(hub, tmp_path):
    values = np.concatenate([np.geomspace(1e-9, 1e9, 5000), -np.geomspace(1e-9, 1e9, 5000)])
    with SummaryWriter(str(tmp_path / "tb" / "wide")) as w:
        w.add_histogram("w", values, 0)  # bins="tensorflow": its exponential buckets
    (plan,) = hub.load([tmp_path / "tb"])
    ((event,),) = [[e for e in hub.outputs(plan) if e.get("kind") == "histogram"]]
    (tb,) = reader(tmp_path / "tb" / "wide").Histograms("w")
    data_bins = len(tb.histogram_value.bucket) - 1  # less torch's empty first bin
    assert data_bins > 512 and len(event["counts"]) == math.ceil(data_bins / 2) <= 512  # merged in pairs
    assert sum(event["counts"]) == sum(tb.histogram_value.bucket) == 10_000
    assert event["edges"][0] == -1e9 and event["edges"][-1] == 1e9


def test_the_tf2_forms_written_by_tensorboards_own_protos(hub, tmp_path):
    run_dir = tmp_path / "tf2" / "run"
    writer = EventFileWriter(str(run_dir))
    png = io.BytesIO()
    PILImage.new("RGB", (5, 3), (10, 20, 30)).save(png, format="PNG")
    gif = io.BytesIO()
    PILImage.new("L", (4, 4), 128).save(gif, format="GIF")
    images = summary_pb2.Summary()
    images.value.add(tag="samples/img", metadata=image_metadata.create_summary_metadata(display_name=None, description=None),
                     tensor=tensor_util.make_tensor_proto([b"5", b"3", png.getvalue(), gif.getvalue()], dtype=np.object_))
    summaries = [
        (1, text_pb("notes/table", np.array([["a", "b"], ["c", "d"]], dtype=object))),
        (2, histogram_pb("acts", np.arange(10.0), buckets=5)),
        (3, histogram_pb("const", np.full(7, 2.5), buckets=4)),
        (4, histogram_pb("empty", np.array([]), buckets=3)),
        (5, images),
    ]
    for step, summary in summaries:
        writer.add_event(event_pb2.Event(wall_time=T0 + step, step=step, summary=summary))
    writer.close()

    (plan,) = hub.load([tmp_path / "tf2"])

    got = {(e["key"], e["step"]): e for e in hub.outputs(plan)}
    assert got[("samples", 1)]["output"] == "a\tb\nc\td"
    assert (got[("acts", 2)]["edges"], got[("acts", 2)]["counts"]) == ([0.0, 1.8, 3.6, 5.4, 7.2, 9.0], [2.0, 2.0, 2.0, 2.0, 2.0])
    assert (got[("const", 3)]["edges"], got[("const", 3)]["counts"]) == ([2.0, 3.0], [7.0])
    assert (got[("empty", 4)]["edges"], got[("empty", 4)]["counts"]) == ([0.0, 1.0], [0.0])
    first, second = got[("samples/img/0", 5)], got[("samples/img/1", 5)]
    assert (first["blob"], first["width"], first["height"]) == (hashlib.sha256(png.getvalue()).hexdigest(), 5, 3)
    assert (second["content_type"], second["width"], second["height"]) == ("image/png", 4, 4)  # the GIF as PNG


def test_a_log_of_images_only_is_imported(hub, tmp_path):
    with SummaryWriter(str(tmp_path / "tb" / "pics")) as w:
        w.add_image("x", np.ones((1, 4, 4), dtype=np.float32), 3)
    (plan,) = hub.load([tmp_path / "tb"])
    assert [e["key"] for e in hub.outputs(plan)] == ["x"] and plan.run.points == 0


def test_importing_twice_sends_the_same_outputs_and_no_image_twice(hub, tmp_path):
    torch_run(tmp_path / "tb" / "run")
    (plan,) = hub.load([tmp_path / "tb"])
    first, put = hub.outputs(plan), list(hub.blobs.put)
    hub.load([tmp_path / "tb"])
    assert hub.outputs(plan) == first and len(put) == 3 and hub.blobs.put == []


@needs_outputs_core
def test_round_trip_what_the_server_holds(hub, tmp_path):
    torch_run(tmp_path / "tb" / "run")
    (plan,) = hub.load([tmp_path / "tb"])
    acc = reader(tmp_path / "tb" / "run")
    samples = hub.held(plan.run_id, "samples")
    assert [(s["step"], s["key"], s["prompt_id"], s["output"]) for s in samples] == [
        (step, "samples", "generations/story/text_summary", text) for step, text in TEXTS.items()]
    media = hub.held(plan.run_id, "media")
    tb = {e.step: e.histogram_value for e in acc.Histograms("weights/w0")}
    assert [(m["step"], m["edges"], m["counts"]) for m in media if m["kind"] == "histogram"] == [
        (s, list(tb[s].bucket_limit), list(tb[s].bucket[1:])) for s in TEXTS]
    held = {e.step: e.encoded_image_string for e in acc.Images("gen/grid")}
    assert {m["step"]: hub.image(plan.run_id, m) for m in media if m["kind"] == "image"} == held
    hub.load([tmp_path / "tb"])
    assert hub.held(plan.run_id, "samples") == samples and hub.held(plan.run_id, "media") == media


@pytest.mark.parametrize("cut", [7])
def test_a_damaged_image_names_the_record(hub, tmp_path, cut):
    run_dir = tmp_path / "tb" / "bad"
    writer = EventFileWriter(str(run_dir))
    summary = summary_pb2.Summary()
    summary.value.add(tag="broken", image=summary_pb2.Summary.Image(height=2, width=2, colorspace=3,
                                                                   encoded_image_string=b"not an image" * cut))
    writer.add_event(event_pb2.Event(wall_time=T0, step=1, summary=summary))
    writer.close()
    from runcast import importers

    with pytest.raises(importers.ImportFailed, match=r"\(record 2\): 'broken': image 'broken' at step 1: not an image"):
        hub.load([tmp_path / "tb"])
    assert hub.runs() == []


def test_the_command_uploads_the_images_over_http(hub, server, tmp_path):
    from importers.tools import runcast_cli

    torch_run(tmp_path / "tb" / "run")
    args = ["import", str(tmp_path / "tb"), "--server", server, "--token", hub.token(), "--project", "demo", "-q"]
    res = runcast_cli(*args)
    assert res.returncode == 0, res.stderr
    run_line, summary = res.stdout.splitlines()
    run_id = run_line.split()[1]
    assert run_line == f"run {run_id}  run: 3 points and 9 sample(s) and media, 1 segment(s)"
    assert summary == "imported 3 points and 9 sample(s) and media as 1 run(s), 1 segment(s), 0 note(s)"
    acc = reader(tmp_path / "tb" / "run")
    for image in acc.Images("gen/grid"):
        sha = hashlib.sha256(image.encoded_image_string).hexdigest()
        assert hub.client.head(f"/api/v1/runs/{run_id}/blobs/{sha}", headers=hub.auth()).status_code == 200
    again = runcast_cli(*args)
    assert again.returncode == 0, again.stderr
    assert again.stdout.splitlines() == [  # nothing new: the points are counted, the outputs said to be sent again
        f"run {run_id}  run: 0 points and 9 sample(s) and media sent (the server keeps each once), 1 segment(s); "
        "3 point(s) already stored",
        "imported 0 points and 9 sample(s) and media sent (the server keeps each once) as 1 run(s), 1 segment(s), "
        "0 note(s); 3 point(s) already stored",
    ]
