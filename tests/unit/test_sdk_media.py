"""runcast.Image, Table and Histogram: from every source the SDK takes to the bytes and events the
server receives (the test receiver holds blobs as the server does: it refuses a media event whose
image it lacks), and what is refused at the call."""

from __future__ import annotations

import hashlib
import io
import logging
import struct
import threading
import time

import numpy as np
import pytest
import runcast
import torch
from PIL import Image as PILImage
from runcast import image_codec, images


def _decoded(data: bytes) -> np.ndarray:
    return np.asarray(PILImage.open(io.BytesIO(data)))


def _images(receiver) -> dict[str, tuple[dict, bytes]]:
    """key -> (media event, the bytes the receiver holds for it)."""
    out = {}
    for event in receiver.of_type("media"):
        if event["kind"] == "image":
            data, content_type = receiver.blobs[event["blob"]]
            assert content_type == event["content_type"]
            assert hashlib.sha256(data).hexdigest() == event["blob"] and len(data) == event["size"]
            out[event["key"]] = (event, data)
    return out


def _jpeg(width: int, height: int) -> bytes:
    out = io.BytesIO()
    PILImage.new("RGB", (width, height), (1, 2, 3)).save(out, format="JPEG", progressive=True)
    return out.getvalue()


def test_every_source_arrives_as_png_or_the_jpeg_given(make_run, receiver, tmp_path):
    gray = np.arange(12, dtype=np.uint8).reshape(3, 4) * 20
    rgb = np.random.default_rng(0).integers(0, 255, (5, 6, 3), dtype=np.uint8)
    rgba = np.zeros((2, 3, 4), dtype=np.uint8)
    rgba[..., 3] = 128
    floats = np.array([[0.0, 0.5, 1.0, 2.0, -1.0, np.nan]], dtype=np.float32)  # clipped to [0, 1], NaN as 0
    chw = torch.zeros(3, 4, 5)
    chw[0] = 1.0
    hwc = torch.full((4, 5, 3), 7, dtype=torch.uint8)
    pil = PILImage.new("RGB", (9, 4), (255, 0, 0))
    jpeg = _jpeg(11, 7)
    (tmp_path / "a.png").write_bytes(image_codec.encode_png(bytes(range(6)), 3, 2, 1))
    (tmp_path / "b.jpg").write_bytes(jpeg)
    PILImage.new("RGB", (5, 5), (0, 0, 255)).save(tmp_path / "c.bmp")
    run = make_run()
    run.log({"loss": 1.0, "gray": runcast.Image(gray), "rgb": runcast.Image(rgb), "rgba": runcast.Image(rgba),
             "floats": runcast.Image(floats), "chw": runcast.Image(chw, caption="red"), "hwc": runcast.Image(hwc),
             "pil": runcast.Image(pil), "jpeg": runcast.Image(jpeg), "png_path": runcast.Image(tmp_path / "a.png"),
             "jpeg_path": runcast.Image(str(tmp_path / "b.jpg")), "bmp_path": runcast.Image(tmp_path / "c.bmp")},
            step=5)
    run.finish()
    assert receiver.of_type("metrics")[0]["values"] == {"loss": 1.0}  # the scalars stay metrics
    got = _images(receiver)
    assert set(got) == {"gray", "rgb", "rgba", "floats", "chw", "hwc", "pil", "jpeg", "png_path", "jpeg_path",
                        "bmp_path"}
    for key, (event, data) in got.items():
        assert event["step"] == 5
        assert image_codec.image_header(data) == (event["content_type"], event["width"], event["height"]), key
    assert (got["jpeg"][1], got["jpeg"][0]["content_type"]) == (jpeg, "image/jpeg")
    assert got["jpeg_path"][1] == jpeg
    assert (_decoded(got["gray"][1]) == gray).all()
    assert (_decoded(got["rgb"][1]) == rgb).all()
    assert (_decoded(got["rgba"][1]) == rgba).all()
    assert _decoded(got["floats"][1]).tolist() == [[0, 128, 255, 255, 0, 0]]
    assert _decoded(got["chw"][1]).shape == (4, 5, 3) and (_decoded(got["chw"][1])[..., 0] == 255).all()
    assert got["chw"][0]["caption"] == "red"
    assert (_decoded(got["hwc"][1]) == 7).all()
    assert _decoded(got["pil"][1]).shape == (4, 9, 3)
    assert _decoded(got["png_path"][1]).tolist() == [[0, 1, 2], [3, 4, 5]]
    assert got["bmp_path"][0]["content_type"] == "image/png"


def test_without_pillow_arrays_are_encoded_by_the_sdks_png_writer(make_run, receiver, monkeypatch):
    monkeypatch.setattr(images, "_pil_module", lambda required=True: None)
    rgb = np.random.default_rng(1).integers(0, 255, (7, 3, 3), dtype=np.uint8)
    run = make_run()
    run.log_media("rgb", runcast.Image(rgb), step=1)
    run.finish()
    event, data = _images(receiver)["rgb"]
    assert (event["width"], event["height"]) == (3, 7) and (_decoded(data) == rgb).all()


@pytest.mark.parametrize("channels", [1, 2, 3, 4])
def test_the_png_writer_round_trips(channels):
    pixels = bytes((i * 37) % 256 for i in range(5 * 4 * channels))
    data = image_codec.encode_png(pixels, 5, 4, channels)
    assert image_codec.image_header(data) == ("image/png", 5, 4)
    assert np.asarray(PILImage.open(io.BytesIO(data))).tobytes() == pixels


def test_headers_are_read_without_a_decoder():
    assert image_codec.image_header(_jpeg(321, 123)) == ("image/jpeg", 321, 123)
    assert image_codec.image_header(b"GIF89a" + b"\0" * 30) is None
    assert image_codec.image_header(b"\xff\xd8\xff\xda" + b"\0" * 10) is None  # a scan before any frame
    assert image_codec.image_header(b"\x89PNG\r\n\x1a\n" + struct.pack(">I", 13) + b"IHDR" + b"\0" * 8) is None


@pytest.mark.parametrize(("make", "error", "match"), [
    (lambda: runcast.Image(np.zeros((2, 3, 5), np.uint8)), ValueError, "shape"),
    (lambda: runcast.Image(np.zeros((2, 3, 3, 1), np.uint8)), ValueError, "shape"),
    (lambda: runcast.Image(np.zeros((4, 4), np.int64)), ValueError, "int64"),
    (lambda: runcast.Image(np.zeros((0, 4), np.uint8)), ValueError, "width and height"),
    (lambda: runcast.Image(torch.zeros(2, 5, 5)), ValueError, "shape"),
    (lambda: runcast.Image(torch.zeros(3, 4, 4, dtype=torch.int32)), ValueError, "int32"),
    (lambda: runcast.Image(b"not an image"), ValueError, "PNG or JPEG"),
    (lambda: runcast.Image("/no/such/file.png"), ValueError, "no file"),
    (lambda: runcast.Image(3.0), TypeError, "float"),
    (lambda: runcast.Histogram([1.0, "x"]), TypeError, r"values\[1\]"),
    (lambda: runcast.Histogram("abc"), TypeError, "values"),
    (lambda: runcast.Histogram(np.array(["a"])), ValueError, "real numbers"),
    (lambda: runcast.Histogram([1.0], bins=0), ValueError, "bins"),
    (lambda: runcast.Histogram([1.0], bins=513), ValueError, "bins"),
    (lambda: runcast.Table(columns=["a", "b"], rows=[[1, 2], [3]]), ValueError, "rows.1"),
    (lambda: runcast.Table(columns=["a"], rows=[[float("nan")]]), ValueError, "rows.0.0"),
    (lambda: runcast.Table(columns=["a"], rows=[[{"x": 1}]]), ValueError, "rows.0.0"),
    (lambda: runcast.Table(columns=[], rows=[]), ValueError, "columns"),
    (lambda: runcast.Table(columns="ab", rows=[]), TypeError, "columns"),
])
def test_caller_mistakes_raise_where_the_media_is_made(make, error, match):
    with pytest.raises(error, match=match):
        make()


def test_bad_keys_captions_and_values_given_to_log_raise_and_record_nothing(make_run, receiver):
    run = make_run()
    image = runcast.Image(np.zeros((2, 2), np.uint8))
    with pytest.raises(ValueError, match="caption"):
        run.log({"loss": 1.0, "img": runcast.Image(np.zeros((2, 2), np.uint8), caption="x" * 1001)})
    with pytest.raises(ValueError):
        run.log({"a\nb": image})
    with pytest.raises(TypeError, match="media must be"):
        run.log_media("img", np.zeros((2, 2)))
    with pytest.raises(ValueError, match="key"):
        run.log_media("", image)
    run.finish()
    assert receiver.of_type("metrics") == [] and receiver.of_type("media") == []
    assert run.stats.media.pending == run.stats.media.queued == 0


def test_histograms_are_binned_on_the_trainer_and_tables_sent_as_given(make_run, receiver):
    values = torch.tensor([1.0, 2.0, 3.0, 2.5, float("nan"), float("inf"), -float("inf"), float("inf")])
    run = make_run()
    run.log({"w": runcast.Histogram(values, bins=4), "np": runcast.Histogram(np.full(10, 3.0), bins=3),
             "list": runcast.Histogram([0, 1, 1, 2], bins=2, caption="few"),
             "t": runcast.Table(columns=["prompt", "loss", "ok"], rows=[("a", np.float32(3.5), True), ["b", 2, None]])},
            step=3)
    run.finish()
    media = {e["key"]: e for e in receiver.of_type("media")}
    assert media["w"]["edges"] == [1.0, 1.5, 2.0, 2.5, 3.0] and media["w"]["counts"] == [1, 0, 1, 2]
    assert (media["w"]["nan"], media["w"]["inf"], media["w"]["neg_inf"]) == (1, 2, 1)
    assert media["np"]["edges"] == pytest.approx([2.5, 2.5 + 1 / 3, 2.5 + 2 / 3, 3.5])
    assert media["np"]["counts"] == [0, 10, 0]
    assert media["list"]["counts"] == [1, 3] and media["list"]["caption"] == "few"
    assert media["t"]["columns"] == ["prompt", "loss", "ok"]
    assert media["t"]["rows"] == [["a", 3.5, True], ["b", 2, None]]
    assert {e["step"] for e in media.values()} == {3}


def test_log_with_only_media_moves_the_step_as_log_does(make_run, receiver):
    run = make_run()
    run.log({"loss": 1.0})
    run.log({"img": runcast.Image(np.zeros((2, 2), np.uint8))})
    run.log({"loss": 0.5})
    run.log_media("later", runcast.Table(columns=["a"], rows=[[1]]))  # at the current step
    run.finish()
    assert [m["step"] for m in receiver.of_type("metrics")] == [0, 2]
    assert {e["key"]: e["step"] for e in receiver.of_type("media")} == {"img": 1, "later": 2}


def test_the_training_thread_only_copies_the_worker_encodes_and_hashes(make_run, receiver, monkeypatch):
    threads = []
    encode = images._encode_array

    def spy(array, layout):
        threads.append(threading.current_thread().name)
        return encode(array, layout)

    monkeypatch.setattr(images, "_encode_array", spy)
    array = np.zeros((4, 4, 3), np.uint8)
    run = make_run()
    run.log({"img": runcast.Image(array)}, step=0)
    array[:] = 255  # the caller reuses its buffer: the snapshot was taken at log()
    assert run.flush()
    run.finish()
    assert threads and all(t.startswith("runcast-media") for t in threads)
    assert (_decoded(_images(receiver)["img"][1]) == 0).all()


def test_the_server_is_asked_first_and_an_image_is_sent_once(make_run, receiver):
    same = np.ones((3, 3), np.uint8)
    run = make_run()
    for step in range(3):
        run.log({"img": runcast.Image(same)}, step=step)
    run.finish()
    assert [m for m, _ in receiver.blob_requests] == ["HEAD", "PUT", "HEAD", "HEAD"]
    assert len(receiver.of_type("media")) == 3 and run.stats.media.uploaded == 1


def test_an_image_the_server_refuses_is_left_out_once_logged_and_the_run_goes_on(make_run, receiver, caplog, tmp_path):
    receiver.blob_mode = "reject"
    (tmp_path / "broken.gif").write_bytes(b"GIF89a not really")
    run = make_run()
    with caplog.at_level(logging.WARNING, logger="runcast"):
        for step in range(3):
            run.log({"loss": float(step), "img": runcast.Image(np.zeros((2, 2), np.uint8) + step)}, step=step)
        run.log({"broken": runcast.Image(tmp_path / "broken.gif")}, step=3)  # not an image: the data's fault
        run.finish()
    assert [m["step"] for m in receiver.of_type("metrics")] == [0, 1, 2]
    assert receiver.of_type("media") == []
    assert run.stats.media.failed == 4 and run.stats.dropped == 0
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING and "not recorded" in r.getMessage()]
    assert len(warnings) == 2 and "refused" in warnings[0] and "'broken'" in warnings[1]


def test_upload_bandwidth_paces_the_images(make_run, receiver):
    noise = np.random.default_rng(2).integers(0, 255, (100, 100, 3), dtype=np.uint8)  # ~30 KB of PNG
    run = make_run(upload_bandwidth=60_000)
    started = time.monotonic()
    run.log({"a": runcast.Image(noise), "b": runcast.Image(noise[::-1].copy())}, step=0)
    assert run.flush(timeout=30)
    assert time.monotonic() - started >= 0.4
    run.finish()
    assert len(receiver.blobs) == 2


def test_a_file_gone_before_log_is_left_out_once_logged(make_run, receiver, tmp_path, caplog):
    path = tmp_path / "gone.png"
    path.write_bytes(image_codec.encode_png(b"\0" * 4, 2, 2, 1))
    image = runcast.Image(path)
    path.unlink()
    run = make_run()
    with caplog.at_level(logging.WARNING, logger="runcast"):
        run.log({"loss": 1.0, "img": image}, step=0)
    run.finish()
    assert [m["values"] for m in receiver.of_type("metrics")] == [{"loss": 1.0}]
    assert run.stats.media.failed == 1 and "'img' at step 0 was not recorded" in caplog.text


def test_an_image_made_while_pillow_is_half_imported(monkeypatch):
    """The media worker imports Pillow on first need; a trainer's next ``Image(array)`` meanwhile
    sees ``PIL.Image`` in ``sys.modules`` without its ``Image`` class yet (seen in a benchmark)."""
    import sys
    import types

    monkeypatch.setitem(sys.modules, "PIL.Image", types.ModuleType("PIL.Image"))  # half made: no attributes
    array = np.zeros((4, 5, 3), dtype=np.uint8)
    source = images.source(array)
    monkeypatch.undo()  # Pillow whole again, as the worker has it when it encodes
    encoded = source.snapshot()()
    assert (encoded.width, encoded.height) == (5, 4)
