"""Checkpoints published to S3 storage: the SDK sends the parts straight to the bucket.

A real moto S3 server runs in its own process (s3server.py); the API hands out presigned
multipart-upload URLs, the trainer PUTs the parts to them (never through the API), and
the API assembles the objects, reads them back to check each sha256, and only then
records the checkpoint.
"""

from __future__ import annotations

import hashlib
import io
import json
import os
import tarfile

import httpx
import pytest

from artifacts.conftest import write_file
from artifacts.live import LiveServer
from artifacts.s3server import PREFIX, moto_s3, s3  # noqa: F401 - fixtures
from artifacts.test_upload import HF_TREE, _tree

MIB = 1024 * 1024


@pytest.fixture
def live(s3, client):  # noqa: F811
    with LiveServer(client.app) as server:
        yield server


def _objects(s3, prefix):  # noqa: F811
    listing = s3.client.list_objects_v2(Bucket=s3.bucket, Prefix=prefix)
    return {o["Key"]: o["Size"] for o in listing.get("Contents", [])}


def test_file_and_directory_go_to_the_bucket(s3, live, client, seed, tmp_path, monkeypatch):  # noqa: F811
    import runcast

    monkeypatch.setenv("RUNCAST_SPOOL_DIR", str(tmp_path / "spool"))
    size = 13 * MIB + 5  # two parts of 8 MiB (RUNCAST_UPLOAD_CHUNK_BYTES)
    sha = write_file(tmp_path / "trainer" / "last.pt", size, 1)
    tree = _tree(tmp_path / "trainer" / "checkpoint-40", HF_TREE)
    run = runcast.init("demo", "s3", server=live.url, token=seed.token(), capture_code=False, flush_interval=0.05)
    run.checkpoint(tmp_path / "trainer" / "last.pt", step=10)
    run.checkpoint(tmp_path / "trainer" / "checkpoint-40", step=40)
    run.finish(timeout=120)
    up = run.stats.uploads
    assert (up.done, up.failed, up.bytes_sent) == (2, 0, size + sum(HF_TREE.values()))
    base = f"{PREFIX}/demo/{run.id}"
    assert _objects(s3, base) == {f"{base}/step-10/last.pt": size,
                                  **{f"{base}/step-40/checkpoint-40/{p}": n for p, n in HF_TREE.items()}}
    assert s3.client.list_multipart_uploads(Bucket=s3.bucket).get("Uploads", []) == []
    file_ckpt, dir_ckpt = client.get(f"/api/v1/runs/{run.id}/checkpoints").json()["checkpoints"]
    assert (file_ckpt["status"], file_ckpt["sha256"], file_ckpt["size"]) == ("available", sha, size)
    assert (dir_ckpt["status"], dir_ckpt["kind"]) == ("available", "directory")
    with httpx.Client(base_url=live.url, timeout=60) as http:
        assert hashlib.sha256(http.get(file_ckpt["download_url"]).content).hexdigest() == sha
        data = http.get(dir_ckpt["download_url"]).content
        listed = {f["path"]: f["sha256"] for f in http.get(dir_ckpt["files_url"]).json()["files"]}
    assert listed == tree
    with tarfile.open(fileobj=io.BytesIO(data), mode="r|") as tar:
        got = {m.name.removeprefix("checkpoint-40/"): hashlib.sha256(tar.extractfile(m).read()).hexdigest() for m in tar}
    assert got == tree


def test_a_part_that_is_not_the_file_fails_and_leaves_nothing(s3, client, seed):  # noqa: F811
    sim = seed.run("demo").start()
    token = {"Authorization": f"Bearer {seed.token()}"}
    good = os.urandom(10 * MIB)
    body = {"segment": sim.segment, "seq": 5, "ts": 1.0, "step": 3, "name": "m.pt", "kind": "file", "metrics": {},
            "public": True, "files": [{"path": "m.pt", "size": len(good), "sha256": hashlib.sha256(good).hexdigest()}]}
    up = client.post(f"/api/v1/runs/{sim.run}/uploads", json=body, headers=token).json()
    (item,) = up["files"]
    assert [p["number"] for p in item["parts"]] == [1, 2] and item["part_bytes"] == 8 * MIB
    bad = bytearray(good)
    bad[123] ^= 0xFF
    for part in item["parts"]:  # straight to the bucket, as the SDK does
        start = (part["number"] - 1) * item["part_bytes"]
        assert httpx.put(part["url"], content=bytes(bad[start:start + item["part_bytes"]]), timeout=30).status_code == 200
    assert client.put(f"/api/v1/runs/{sim.run}/uploads/{up['id']}/files/0?offset=0", content=b"x",
                      headers={**token, "X-Runcast-Chunk-Sha256": hashlib.sha256(b"x").hexdigest()}).status_code == 409
    res = client.post(f"/api/v1/runs/{sim.run}/uploads/{up['id']}/complete", headers=token)
    assert res.status_code == 422 and res.json()["error"]["field"] == "files[0].sha256"
    assert _objects(s3, PREFIX) == {}
    assert s3.client.list_multipart_uploads(Bucket=s3.bucket).get("Uploads", []) == []
    assert client.get(f"/api/v1/runs/{sim.run}/checkpoints", headers=token).json()["checkpoints"] == []
    other = {"Authorization": f"Bearer {seed.token('other')}"}
    assert client.post(f"/api/v1/runs/{sim.run}/uploads", json=body, headers=other).status_code == 404


@pytest.fixture
def presigned(s3, monkeypatch):  # noqa: F811 - before `client`: the app reads its settings once

    monkeypatch.setenv("RUNCAST_DOWNLOAD_PRESIGN_S", "300")
    yield


def test_runcast_download_follows_the_presigned_redirect_and_resumes(s3, presigned, live, client, seed, tmp_path,  # noqa: F811
                                                                     monkeypatch):
    import runcast
    from runcast.cli.download import download

    monkeypatch.setenv("RUNCAST_SPOOL_DIR", str(tmp_path / "spool"))
    size = 6 * MIB + 3
    sha = write_file(tmp_path / "trainer" / "last.pt", size, 2)
    run = runcast.init("demo", "presigned", server=live.url, token=seed.token(), capture_code=False,
                       flush_interval=0.05)
    run.checkpoint(tmp_path / "trainer" / "last.pt", step=10)
    run.finish(timeout=120)
    listed = client.get(f"/api/v1/runs/{run.id}/checkpoints").json()["checkpoints"][0]
    with httpx.Client(base_url=live.url, timeout=60) as http:
        moved = http.get(listed["download_url"])
    assert moved.status_code == 307 and moved.headers["location"].startswith(s3.url)

    first = download(live.url, run.id, "step:10", tmp_path / "a", token=seed.token())
    assert (first.path.stat().st_size, first.sha256) == (size, sha)
    # A transfer broken at 2 MiB (the partial file and the bucket's ETag it was sent with, as
    # _fetch keeps them) resumes through the redirect: the bucket answers the repeated Range.
    out = tmp_path / "b"
    out.mkdir()
    whole = first.path.read_bytes()
    with httpx.Client(timeout=60) as bucket:
        etag = bucket.get(moved.headers["location"], headers={"Range": "bytes=0-0"}).headers["etag"]
    (out / "last.pt.part").write_bytes(whole[: 2 * MIB])
    (out / "last.pt.part.json").write_text(json.dumps({"etag": etag, "url": listed["download_url"], "size": size}))
    resumed = download(live.url, run.id, "step:10", out, token=seed.token())
    assert resumed.sha256 == sha and resumed.path.read_bytes() == whole
    assert (resumed.resumed_from, resumed.received) == (2 * MIB, size - 2 * MIB)
