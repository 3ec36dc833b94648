"""Images when the server is away: kept in the spool (``blobs/``), stored before their events by the
sender's replay and by ``runcast sync``; nothing lost, no event sent before its image."""

from __future__ import annotations

import hashlib
import json

import numpy as np
import runcast
from runcast.cli.main import app
from runcast.sender.spool import REFUSED, find_spools
from sdk_receiver import Receiver
from typer.testing import CliRunner


def _image(i: int) -> np.ndarray:
    return np.full((4, 6, 3), i * 10, dtype=np.uint8)


def _all_stored(receiver: Receiver, count: int) -> None:
    media = [e for e in receiver.of_type("media") if e["kind"] == "image"]
    assert sorted(e["step"] for e in media) == list(range(count))
    for event in media:
        data, _ = receiver.blobs[event["blob"]]
        assert hashlib.sha256(data).hexdigest() == event["blob"]
        assert not any(k.startswith("_") for k in event)  # the worker's marks never leave the trainer
    assert sorted(m["step"] for m in receiver.of_type("metrics")) == list(range(count))


def _sync(spool_root, server: Receiver, *more: str):
    return CliRunner().invoke(app, ["sync", str(spool_root), "--server", server.url, "--token", "t", "-q", *more])


def test_server_down_then_runcast_sync_stores_every_image(make_run, receiver, tmp_path):
    run = make_run(finish_timeout=1.0)
    assert run.flush()
    receiver.stop()
    for step in range(6):
        run.log({"loss": float(step), "img": runcast.Image(_image(step))}, step=step)
    run.finish()
    assert run.stats.media.spooled == 6 and run.stats.media.failed == 0
    (spool,) = find_spools(tmp_path / "spool")
    assert len(list((spool / "blobs").iterdir())) == 6
    receiver.start()
    result = _sync(tmp_path / "spool", receiver)
    assert result.exit_code == 0, result.output
    _all_stored(receiver, 6)
    assert find_spools(tmp_path / "spool") == [] and not spool.exists()


def test_an_offline_run_keeps_its_images_for_runcast_sync(make_run, tmp_path):
    run = make_run(server=None, transport=None)
    for step in range(3):
        run.log({"loss": float(step), "img": runcast.Image(_image(step)), "h": runcast.Histogram([step, 1.0])},
                step=step)
    run.finish()
    server = Receiver().start()
    try:
        result = _sync(tmp_path / "spool", server)
        assert result.exit_code == 0, result.output
        _all_stored(server, 3)
        assert len([e for e in server.of_type("media") if e["kind"] == "histogram"]) == 3
        assert [m for m, _ in server.blob_requests] == ["HEAD", "PUT"] * 3
    finally:
        server.stop()


def test_images_kept_during_an_outage_reach_the_server_when_it_is_back(make_run, receiver, tmp_path):
    receiver.blob_mode = "fail"  # the blobs route is down, the ingest is not
    run = make_run()
    for step in range(4):
        run.log({"loss": float(step), "img": runcast.Image(_image(step))}, step=step)
    receiver.wait_for(lambda: run.stats.media.spooled == 4)
    assert receiver.of_type("media") == []  # never sent before its image
    receiver.blob_mode = "ok"
    receiver.wait_for(lambda: len(receiver.of_type("media")) == 4, timeout=20)
    run.log({"loss": 9.0, "img": runcast.Image(_image(9))}, step=4)
    run.finish()
    _all_stored(receiver, 5)
    assert run.stats.dropped == 0 and find_spools(tmp_path / "spool") == []


def test_an_image_the_server_refuses_at_sync_is_set_aside_alone(make_run, tmp_path):
    run = make_run(server=None, transport=None)
    for step in range(2):
        run.log({"loss": float(step), "img": runcast.Image(_image(step))}, step=step)
    run.finish()
    server = Receiver().start()
    try:
        server.blob_mode = "reject"
        result = _sync(tmp_path / "spool", server)
        assert result.exit_code == 1 and "--retry-refused" in result.output
        assert [m["step"] for m in server.of_type("metrics")] == [0, 1] and server.of_type("media") == []
        (spool,) = find_spools(tmp_path / "spool")
        refused = [json.loads(line) for line in (spool / REFUSED).read_text().splitlines()]
        assert [r["events"] for r in refused] == [1, 1] and len(list((spool / "blobs").iterdir())) == 2
        server.blob_mode = "ok"  # the cause is fixed (say, a higher pixel limit)
        again = _sync(tmp_path / "spool", server, "--retry-refused")
        assert again.exit_code == 0, again.output
        _all_stored(server, 2)
    finally:
        server.stop()
