"""Images end to end on a real `runcast serve` (embedded: SQLite, local storage): the SDK logs images
(numpy, PIL, PNG and JPEG bytes), histograms and tables; the server holds every image with the bytes
that were sent; thumbnails resize; hostile uploads are refused by name with nothing stored and the
run's metrics unharmed; and with the server down, the images wait in the spool for `runcast sync`.

Media rows are written by the ingest half of issue 25; until then these tests insert the rows the
image route reads straight into the server's database.
"""

from __future__ import annotations

import hashlib
import io
import time
from pathlib import Path
from typing import Any

import httpx
import numpy as np
import pytest
import runcast
from artifacts.blob_images import HTML, SVG, jpeg, png, png_bomb, sha
from PIL import Image
from runcast.sender.spool import find_spools
from runcast_server.core.db import make_engine
from runcast_server.outputs.models import Blob, Media
from runcast_server.record.models import Segment
from services import free_port
from sqlalchemy import select
from sqlalchemy.orm import Session

from integration.helpers import export_rows, get_run
from integration.test_embedded import make_token

pytestmark = pytest.mark.slow
MAX_BLOB = 1024 * 1024


def _serve(processes: Any, data_dir: Path, port: int | None = None) -> str:
    processes.env = {"RUNCAST_DATA_DIR": str(data_dir), "RUNCAST_MAX_BLOB_BYTES": str(MAX_BLOB)}
    processes.start_api(port=port)
    assert processes.api_url is not None
    return processes.api_url


def _blobs(data_dir: Path) -> dict[str, Blob]:
    engine = make_engine(f"sqlite:///{data_dir / 'runcast.db'}")
    try:
        with Session(engine) as session:
            return {b.sha256: b for b in session.scalars(select(Blob))}
    finally:
        engine.dispose()


def _stored(data_dir: Path, digest: str) -> bytes:
    return (data_dir / "storage" / "demo" / "blobs" / digest[:2] / digest).read_bytes()


def _add_media(data_dir: Path, run_id: str, digest: str) -> int:
    engine = make_engine(f"sqlite:///{data_dir / 'runcast.db'}")
    try:
        with Session(engine) as session:
            segment = session.scalar(select(Segment.id).where(Segment.run_id == run_id))
            row = Media(run_id=run_id, segment_id=segment, seq=10_000 + len(digest), step=1, key="img", kind="image",
                        blob=digest, payload={}, ts=time.time(), received_at=time.time(), version=None)
            session.add(row)
            session.commit()
            return row.id
    finally:
        engine.dispose()


def _wait_finished(url: str, run_id: str, token: str) -> None:
    deadline = time.monotonic() + 60
    while get_run(url, run_id, token).json().get("status") != "finished":
        assert time.monotonic() < deadline, "the run never finished"
        time.sleep(0.2)


def test_images_histograms_and_tables_reach_a_real_server(processes, tmp_path):
    data_dir = tmp_path / "data"
    url = _serve(processes, data_dir)
    token = make_token(processes.env, "demo", data_dir)
    gray = np.arange(48 * 64, dtype=np.uint32).reshape(48, 64).astype(np.uint8)
    photo = Image.new("RGB", (120, 60), (30, 60, 90))
    png_bytes, jpeg_bytes = png(80, 40), jpeg(64, 64)
    run = runcast.init("demo", "media", server=url, token=token, capture_code=False, flush_interval=0.05)
    for step in range(5):
        run.log({"loss": 1.0 / (step + 1)}, step=step)
    run.log({"gray": runcast.Image(gray), "photo": runcast.Image(photo, caption="a photo"),
             "png": runcast.Image(png_bytes), "jpeg": runcast.Image(jpeg_bytes),
             "weights": runcast.Histogram(np.random.default_rng(0).normal(size=10_000), bins=32),
             "worst": runcast.Table(columns=["prompt", "loss"], rows=[["a", 3.1], ["b", 2.9]])}, step=5)
    run.finish()
    assert run.stats.media.uploaded == 4 and run.stats.media.failed == 0 and run.stats.dropped == 0
    _wait_finished(url, run.id, token)

    blobs = _blobs(data_dir)
    assert len(blobs) == 4
    assert (_stored(data_dir, sha(png_bytes)), blobs[sha(png_bytes)].content_type) == (png_bytes, "image/png")
    assert (_stored(data_dir, sha(jpeg_bytes)), blobs[sha(jpeg_bytes)].content_type) == (jpeg_bytes, "image/jpeg")
    decoded = {(b.width, b.height): np.asarray(Image.open(io.BytesIO(_stored(data_dir, d)))) for d, b in blobs.items()}
    assert (decoded[(64, 48)] == gray).all() and (decoded[(120, 60)] == np.asarray(photo)).all()
    auth = {"Authorization": f"Bearer {token}"}
    for digest in blobs:
        assert hashlib.sha256(_stored(data_dir, digest)).hexdigest() == digest
        assert httpx.head(f"{url}/api/v1/runs/{run.id}/blobs/{digest}", headers=auth).status_code == 200

    mid = _add_media(data_dir, run.id, sha(jpeg_bytes))
    whole = httpx.get(f"{url}/api/v1/runs/{run.id}/media/{mid}/image", timeout=30)
    assert whole.status_code == 200 and whole.content == jpeg_bytes and whole.headers["content-type"] == "image/jpeg"
    thumb = httpx.get(f"{url}/api/v1/runs/{run.id}/media/{mid}/image", params={"w": 32}, timeout=30)
    assert thumb.status_code == 200 and Image.open(io.BytesIO(thumb.content)).size == (32, 32)
    assert thumb.headers["cache-control"] == "public, max-age=31536000, immutable"
    assert thumb.headers["x-content-type-options"] == "nosniff" and "sandbox" in thumb.headers["content-security-policy"]


def test_hostile_uploads_are_refused_by_name_and_store_nothing(processes, tmp_path):
    data_dir = tmp_path / "data"
    url = _serve(processes, data_dir)
    token, other = make_token(processes.env, "demo", data_dir), make_token(processes.env, "other", data_dir)
    run = runcast.init("demo", "target", server=url, token=token, capture_code=False, flush_interval=0.05)
    for step in range(20):
        run.log({"loss": 2.0 / (step + 1)}, step=step)
    run.finish()
    _wait_finished(url, run.id, token)
    before = export_rows(url, run.id, token)

    def put(body: bytes, content_type: str = "image/png", digest: str | None = None,
            bearer: str | None = token) -> httpx.Response:
        headers = {"Content-Type": content_type, **({"Authorization": f"Bearer {bearer}"} if bearer else {})}
        return httpx.put(f"{url}/api/v1/runs/{run.id}/blobs/{digest or sha(body)}", content=body, headers=headers,
                         timeout=60)

    cases = [
        (put(png(), "image/jpeg"), 422, "Content-Type"),  # a lying content type
        (put(SVG, "image/svg+xml"), 415, "Content-Type"),
        (put(SVG), 415, "Content-Type"),
        (put(HTML), 415, "Content-Type"),
        (put(png_bomb()), 422, "body"),  # 30000×30000 pixels
        (put(png(10, 10) + b"\0" * MAX_BLOB), 413, "body"),
        (put(png(), digest=sha(b"other bytes")), 422, "sha256"),
        (put(png(), bearer=other), 404, "run"),  # another project's token
        (put(png(), bearer=None), 401, "Authorization"),
    ]
    for i, (res, status, field) in enumerate(cases):
        assert res.status_code == status, (i, res.text)
        assert res.json()["error"]["field"] == field, (i, res.text)
    assert _blobs(data_dir) == {}
    assert not (data_dir / "storage" / "demo" / "blobs").exists()
    assert export_rows(url, run.id, token) == before  # the run's metrics unharmed
    assert put(png()).status_code == 201  # and the server still takes a real image


def test_server_down_then_runcast_sync_stores_every_image(processes, tmp_path, monkeypatch):
    data_dir = tmp_path / "data"
    spool = tmp_path / "spool"
    monkeypatch.setenv("RUNCAST_SPOOL_DIR", str(spool))
    port = free_port()
    arrays = [np.full((16, 16, 3), 20 * i, dtype=np.uint8) for i in range(6)]
    run = runcast.init("demo", "outage", server=f"http://127.0.0.1:{port}", token="not checked yet",
                       capture_code=False, flush_interval=0.05, start_timeout=1, retry_initial=0.05, retry_max=0.2,
                       finish_timeout=2)  # nothing listens there yet: the run starts spooled
    for step, array in enumerate(arrays):
        run.log({"loss": float(step), "img": runcast.Image(array)}, step=step)
    run.finish()
    assert run.stats.media.spooled == 6 and run.stats.sent == 0
    assert len(list((find_spools(spool)[0] / "blobs").iterdir())) == 6

    url = _serve(processes, data_dir, port=port)
    token = make_token(processes.env, "demo", data_dir)
    res = processes.cli("sync", str(spool), "--token", token, "-q")  # to the address the spool recorded
    assert "sent 14 events from 1 spool(s)" in res.stdout, res.stdout  # start, 6 metrics, 6 images, finished
    assert find_spools(spool) == []
    _wait_finished(url, run.id, token)
    blobs = _blobs(data_dir)
    assert len(blobs) == 6
    assert sorted(int(np.asarray(Image.open(io.BytesIO(_stored(data_dir, d))))[0, 0, 0]) for d in blobs) == \
        [20 * i for i in range(6)]
    assert [r["step"] for r in export_rows(url, run.id, token)] == list(range(6))
