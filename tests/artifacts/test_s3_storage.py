"""The S3-compatible backend against a real S3 server process (moto's standalone server).

Objects are uploaded with boto3, a checkpoint event pointing at them is ingested, and the
download route is exercised exactly like the local backend's: bytes, headers, Range,
If-Range, HEAD, 416. Traversal in any form is refused before any request reaches the
store, and every key the app asks for lies under the configured prefix.

The key-derivation tests at the top need no server; the rest start one (``services``).
"""

from __future__ import annotations

import hashlib

import pytest
from runcast_server.artifacts.s3 import S3Location, S3Storage, parse_storage_url
from runcast_server.artifacts.storage import NotStored, UnsafePath

from artifacts.conftest import checkpoint_event
from artifacts.s3server import PREFIX, S3Env, moto_s3, record_requests, s3  # noqa: F401 - fixtures
from artifacts.test_path_safety import ATTACKS


def _data(size: int, seed: int = 0) -> bytes:
    block = hashlib.sha256(str(seed).encode()).digest() * 2048
    return (block * (size // len(block) + 1))[:size]


def _keys(trainer_root: str | None = None) -> S3Storage:
    return S3Storage(S3Location("bkt", "ckpts"), client=None, trainer_root=trainer_root)


# --- key derivation (no server) -----------------------------------------------------------


@pytest.mark.parametrize("name", sorted(ATTACKS))
def test_key_refuses_every_local_attack(name):
    with pytest.raises(UnsafePath):
        _keys().key_for(ATTACKS[name])


@pytest.mark.parametrize(
    "path",
    [
        "s3://bkt/secret.txt",  # the bucket, outside the prefix
        "s3://bkt/ckpts",  # the prefix itself
        "s3://bkt/ckpts/",
        "s3://bkt/ckpts-evil/x.pt",  # shares the prefix as a string
        "s3://bkt/ckpts/../secret.txt",
        "s3://bkt/ckpts/%2e%2e/secret.txt",
        "s3://bkt/ckpts/%252e%252e%252fsecret.txt",
        "s3://bkt/ckpts/a\x00.pt",
        "s3://other/ckpts/x.pt",  # another bucket
        "s3://bkt",
        "/mnt/sync/x.pt",  # absolute, and no trainer root configured
        "/ckpts/x.pt",  # an absolute path is never taken as a key
        "run/" + "a" * 1100 + ".pt",  # longer than S3 allows
    ],
)
def test_key_refuses_s3_escapes(path):
    with pytest.raises(UnsafePath):
        _keys().key_for(path)


def test_keys_accepted():
    storage = _keys("/mnt/sync")
    assert storage.key_for("run1/step.pt") == "ckpts/run1/step.pt"
    assert storage.key_for("./run1//step.pt") == "ckpts/run1/step.pt"
    assert storage.key_for("s3://bkt/ckpts/run1/step.pt") == "ckpts/run1/step.pt"
    assert storage.key_for("/mnt/sync/run1/step.pt") == "ckpts/run1/step.pt"
    with pytest.raises(UnsafePath):
        storage.key_for("/mnt/sync-evil/run1/step.pt")
    root = S3Storage(S3Location("bkt", ""), client=None)
    assert root.key_for("s3://bkt/run1/step.pt") == "run1/step.pt"
    assert root.key_for("run1/step.pt") == "run1/step.pt"


def test_storage_url_parsing():
    assert parse_storage_url("s3://bkt/a/b/") == S3Location("bkt", "a/b")
    assert parse_storage_url("s3://bkt") == S3Location("bkt", "")
    for bad in ("s3://bkt/../x", "s3://bkt/%2e%2e/x", "http://bkt/x", "s3://", "s3://Bad_Bucket/x"):
        with pytest.raises(ValueError):
            parse_storage_url(bad)


# --- against the S3 server ---------------------------------------------------------------------


@pytest.fixture
def s3_client(s3: S3Env, monkeypatch):  # noqa: F811 - the fixture above
    from fastapi.testclient import TestClient
    from runcast_server.app import create_app

    monkeypatch.setenv("RUNCAST_DOWNLOAD_CHUNK_BYTES", "65536")  # many chunks per transfer
    with TestClient(create_app()) as c:
        yield c


def _listed(client, run):
    return {c["step"]: c for c in client.get(f"/api/v1/runs/{run}/checkpoints").json()["checkpoints"]}


@pytest.mark.services
def test_s3_download_headers_range_if_range_head(s3, s3_client, seed):  # noqa: F811
    size = 3 * 1024 * 1024 + 17
    data = _data(size, 7)
    sha = hashlib.sha256(data).hexdigest()
    s3.put(f"{PREFIX}/demo/run a/model é.pt", data)
    sim = seed.run().start()
    sim.send(
        [
            checkpoint_event(sim, "demo/run a/model é.pt", 10, size, sha, metrics={"val/loss": 2.0}),
            checkpoint_event(sim, f"s3://{s3.bucket}/{PREFIX}/demo/run a/model é.pt", 11, size, sha),
        ]
    )
    listed = _listed(s3_client, sim.run)
    for step in (10, 11):
        assert (listed[step]["status"], listed[step]["kind"], listed[step]["filename"]) == (
            "available", "file", "model é.pt"
        ), listed[step]
    url = listed[10]["download_url"]
    requests = record_requests(s3_client, s3)

    full = s3_client.get(url)
    assert full.status_code == 200 and full.content == data
    h = full.headers
    assert (h["etag"], h["content-length"], h["accept-ranges"]) == (f'"{sha}"', str(size), "bytes")
    assert h["content-disposition"] == "attachment; filename=\"model _.pt\"; filename*=UTF-8''model%20%C3%A9.pt"
    assert "last-modified" in h
    # Streamed: one ranged GET for the whole body (read 64 KiB at a time), no other read.
    gets = [p for op, p in requests if op == "GetObject"]
    assert [g["Range"] for g in gets] == [f"bytes=0-{size - 1}"] and gets[0].get("IfMatch")

    head = s3_client.head(url)
    assert head.status_code == 200 and head.content == b"" and head.headers["content-length"] == str(size)
    assert head.headers["etag"] == f'"{sha}"'

    requests.clear()
    part = s3_client.get(url, headers={"Range": "bytes=100-199"})
    assert part.status_code == 206 and part.content == data[100:200]
    assert part.headers["content-range"] == f"bytes 100-199/{size}" and part.headers["content-length"] == "100"
    assert [p["Range"] for op, p in requests if op == "GetObject"] == ["bytes=100-199"]
    tail = s3_client.get(url, headers={"Range": f"bytes={size - 5}-"})
    assert tail.status_code == 206 and tail.content == data[-5:]
    suffix = s3_client.get(url, headers={"Range": "bytes=-10"})
    assert suffix.status_code == 206 and suffix.content == data[-10:]
    clipped = s3_client.get(url, headers={"Range": f"bytes={size - 3}-{size + 1000}"})
    assert clipped.status_code == 206 and clipped.content == data[-3:]
    middle = s3_client.get(url, headers={"Range": "bytes=1000000-"})
    assert middle.status_code == 206 and middle.content == data[1000000:]

    bad = s3_client.get(url, headers={"Range": f"bytes={size}-"})
    assert bad.status_code == 416 and bad.headers["content-range"] == f"bytes */{size}"
    for header in ("bytes=5-1", "items=0-5", "bytes=0-1,5-6"):
        res = s3_client.get(url, headers={"Range": header})
        assert (res.status_code, len(res.content)) == (200, size), header

    same = s3_client.get(url, headers={"Range": "bytes=1000-", "If-Range": f'"{sha}"'})
    assert same.status_code == 206 and same.content == data[1000:]
    changed = s3_client.get(url, headers={"Range": "bytes=1000-", "If-Range": '"' + "0" * 64 + '"'})
    assert changed.status_code == 200 and changed.content == data
    head_range = s3_client.head(url, headers={"Range": "bytes=0-9"})
    assert head_range.status_code == 206 and head_range.headers["content-length"] == "10"

    via_url = s3_client.get(listed[11]["download_url"], headers={"Range": "bytes=0-99"})
    assert via_url.status_code == 206 and via_url.content == data[:100]


@pytest.mark.services
def test_s3_statuses_missing_size_private_directory(s3, s3_client, seed):  # noqa: F811
    s3.put(f"{PREFIX}/demo/a.pt", b"a" * 1000)
    s3.put(f"{PREFIX}/demo/p.pt", b"p" * 10)
    s3.put(f"{PREFIX}/demo/ds/global_step5/model.bin", b"m" * 10)
    sim = seed.run().start()
    sim.send(
        [
            checkpoint_event(sim, "demo/a.pt", 1, 999, None),  # recorded size differs
            checkpoint_event(sim, "demo/absent.pt", 2, 10, None),
            checkpoint_event(sim, "demo/p.pt", 3, 10, hashlib.sha256(b"p" * 10).hexdigest(), public=False),
            checkpoint_event(sim, "demo/ds/global_step5", 5, 10, None),
        ]
    )
    listed = _listed(s3_client, sim.run)
    assert (listed[1]["status"], listed[1]["reason"]) == ("missing", "the file is no longer the recorded size")
    assert (listed[2]["status"], listed[2]["reason"]) == ("missing", "no such object under the storage prefix")
    assert listed[3]["status"] == "private"
    assert (listed[5]["status"], listed[5]["kind"]) == ("available", "directory")
    base = f"/api/v1/runs/{sim.run}/checkpoints"
    assert s3_client.get(f"{base}/{listed[2]['id']}/download").status_code == 404
    assert s3_client.get(f"{base}/{listed[3]['id']}/download").status_code == 404  # private: as unknown
    ok = s3_client.get(f"{base}/{listed[3]['id']}/download", headers={"Authorization": f"Bearer {seed.token()}"})
    assert ok.status_code == 200 and ok.content == b"p" * 10
    tar = s3_client.get(f"{base}/{listed[5]['id']}/download")
    assert tar.status_code == 200 and tar.headers["content-type"] == "application/x-tar"
    assert b"m" * 10 in tar.content
    files = s3_client.get(listed[5]["files_url"]).json()["files"]
    assert [(f["path"], f["size"]) for f in files] == [("model.bin", 10)]


@pytest.mark.services
def test_s3_traversal_refused_and_no_key_outside_prefix_requested(s3, s3_client, seed):  # noqa: F811
    s3.put("secret.txt", b"top secret")
    s3.put(f"{PREFIX}-evil/x.pt", b"top secret")
    s3.put(f"{PREFIX}/demo/good.pt", b"g" * 10)
    s3.put(f"{PREFIX}/pproj/secret.pt", b"top secret")  # another project's object
    requests = record_requests(s3_client, s3)
    sim = seed.run().start()
    attacks = [p for p in ATTACKS.values() if p and "\x00" not in p] + [
        "pproj/secret.pt",
        f"s3://{s3.bucket}/{PREFIX}/pproj/secret.pt",
        f"s3://{s3.bucket}/secret.txt",
        f"s3://{s3.bucket}/{PREFIX}/../secret.txt",
        f"s3://{s3.bucket}/{PREFIX}/%2e%2e/secret.txt",
        f"s3://{s3.bucket}/{PREFIX}-evil/x.pt",
        f"s3://other-bucket/{PREFIX}/good.pt",
        "/secret.txt",
    ]
    for step, path in enumerate(attacks):
        sim.send([checkpoint_event(sim, path, step, 10, None)])
    sim.send([checkpoint_event(sim, "demo/good.pt", 1000, 10, hashlib.sha256(b"g" * 10).hexdigest())])
    listed = s3_client.get(f"/api/v1/runs/{sim.run}/checkpoints").json()["checkpoints"]
    assert len(listed) == len(attacks) + 1
    for c in listed:
        res = s3_client.get(f"/api/v1/runs/{sim.run}/checkpoints/{c['id']}/download")
        if c["step"] == 1000:
            assert res.status_code == 200 and res.content == b"g" * 10
            continue
        assert c["status"] == "missing" and c["reason"].startswith("refused:"), c
        assert res.status_code == 404 and b"top secret" not in res.content
    keys = {p.get("Key") or p.get("Prefix") for _, p in requests}
    assert keys == {f"{PREFIX}/demo/good.pt"}, keys


@pytest.mark.services
def test_s3_object_replaced_after_locate_is_not_mixed(s3, s3_client):  # noqa: F811
    storage = s3_client.app.state.context.storage
    s3.put(f"{PREFIX}/r.pt", b"1" * 100)
    obj = storage.locate("r.pt")
    assert (obj.key, obj.size) == ("r.pt", 100)
    s3.put(f"{PREFIX}/r.pt", b"2" * 100)
    reader = storage.open(obj)
    try:
        with pytest.raises(OSError):
            reader.read_at(0, 50)
    finally:
        reader.close()
    with pytest.raises(NotStored):
        storage.locate("nothing-here.pt")


@pytest.mark.services
def test_s3_presigned_redirect_after_the_visibility_check(s3, seed, monkeypatch):  # noqa: F811
    """With download_presign_s the bucket sends the bytes: a GET is answered 307 to a presigned
    URL, only after the same checks as a streamed download; HEAD and directory archives stay."""
    import httpx
    from fastapi.testclient import TestClient
    from runcast_server.app import create_app

    data = _data(300_000, 3)
    sha = hashlib.sha256(data).hexdigest()
    s3.put(f"{PREFIX}/demo/public é.pt", data)
    s3.put(f"{PREFIX}/demo/private.pt", b"p" * 10)
    s3.put(f"{PREFIX}/demo/ds/global_step5/model.bin", b"m" * 10)
    monkeypatch.setenv("RUNCAST_DOWNLOAD_PRESIGN_S", "120")
    sim = seed.run().start()
    sim.send(
        [
            checkpoint_event(sim, "demo/public é.pt", 1, len(data), sha),
            checkpoint_event(sim, "demo/private.pt", 2, 10, None, public=False),
            checkpoint_event(sim, "demo/ds/global_step5", 5, 10, None),
        ]
    )
    with TestClient(create_app()) as client:
        listed = _listed(client, sim.run)
        url = listed[1]["download_url"]
        moved = client.get(url, follow_redirects=False)
        assert moved.status_code == 307 and moved.headers["cache-control"] == "private, no-store"
        location = moved.headers["location"]
        assert location.startswith(s3.url) and "X-Amz-Signature=" in location and "X-Amz-Expires=120" in location

        with httpx.Client(timeout=10) as bucket:
            body = bucket.get(location)
            assert body.status_code == 200 and body.content == data
            assert body.headers["content-disposition"] == client.head(url).headers["content-disposition"]
            part = bucket.get(location, headers={"Range": "bytes=100-199"})  # resume: the client repeats Range
            assert part.status_code == 206 and part.content == data[100:200]

        head = client.head(url)  # the API still answers HEAD with the recorded size and sha256
        assert head.status_code == 200 and head.headers["etag"] == f'"{sha}"'
        assert head.headers["content-length"] == str(len(data))
        bad = client.get(url, headers={"Range": f"bytes={len(data)}-"}, follow_redirects=False)
        assert bad.status_code == 416  # checked before any URL is handed out

        private = f"/api/v1/runs/{sim.run}/checkpoints/{listed[2]['id']}/download"
        hidden = client.get(private, follow_redirects=False)
        assert hidden.status_code == 404 and "location" not in hidden.headers
        team = client.get(private, headers={"Authorization": f"Bearer {seed.token()}"}, follow_redirects=False)
        assert team.status_code == 307

        tar = client.get(f"/api/v1/runs/{sim.run}/checkpoints/{listed[5]['id']}/download", follow_redirects=False)
        assert tar.status_code == 200 and tar.headers["content-type"] == "application/x-tar"
