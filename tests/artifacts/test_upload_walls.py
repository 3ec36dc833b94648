"""The upload routes' walls: another project's token, hostile paths, corrupted bytes, size limits.

Each refused request must leave nothing behind: no upload row, no staged or placed file,
no checkpoint listed. Requests go through the embedded app (TestClient) with real tokens.
"""

from __future__ import annotations

import hashlib
import os
from typing import Any

import pytest
from runcast_server.artifacts.models import Upload
from sqlalchemy import func, select


def _sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def _begin_body(sim, files, *, name="ckpt.pt", kind="file", step=10):
    return {"segment": sim.segment, "seq": 900, "ts": 1.0, "step": step, "name": name, "kind": kind,
            "metrics": {}, "public": True, "files": files}


def _auth(token):
    return {"Authorization": f"Bearer {token}"}


def _uploads_count(db: Any):
    with db.scope() as session:
        return session.scalar(select(func.count()).select_from(Upload))


def _nothing_written(db: Any, storage_root, client, sim, token):
    assert _uploads_count(db) == 0
    staging = storage_root / ".runcast-uploads"
    assert not staging.exists() or not any(staging.iterdir())
    assert not (storage_root / "demo" / sim.run).exists()
    listed = client.get(f"/api/v1/runs/{sim.run}/checkpoints", headers=_auth(token)).json()["checkpoints"]
    assert listed == []


@pytest.fixture
def sim(seed):
    return seed.run("demo").start()


def test_another_projects_token_writes_nothing(client, seed, sim, storage_root):
    data = b"x" * 1000
    body = _begin_body(sim, [{"path": "ckpt.pt", "size": len(data), "sha256": _sha(data)}])
    other = seed.token("other")
    res = client.post(f"/api/v1/runs/{sim.run}/uploads", json=body, headers=_auth(other))
    assert res.status_code == 404 and res.json()["error"]["field"] == "run"
    assert client.post(f"/api/v1/runs/{sim.run}/uploads", json=body).status_code == 401
    # the owner's upload: another project can neither add bytes to it nor complete it
    up = client.post(f"/api/v1/runs/{sim.run}/uploads", json=body, headers=_auth(seed.token())).json()
    for method, url, kwargs in (
        ("PUT", f"/api/v1/runs/{sim.run}/uploads/{up['id']}/files/0?offset=0",
         {"content": data, "headers": {**_auth(other), "X-Runcast-Chunk-Sha256": _sha(data)}}),
        ("POST", f"/api/v1/runs/{sim.run}/uploads/{up['id']}/complete", {"headers": _auth(other)}),
    ):
        res = client.request(method, url, **kwargs)
        assert res.status_code == 404, res.text
    assert not (storage_root / ".runcast-uploads" / up["id"]).exists()
    # another project's own run: the upload id of this run is unknown there
    theirs = seed.run("other").start()
    res = client.post(f"/api/v1/runs/{theirs.run}/uploads/{up['id']}/complete", headers=_auth(other))
    assert res.status_code == 404 and res.json()["error"]["field"] == "upload"


HOSTILE = [
    ("../escape.pt", "files[0].path"),
    ("/etc/passwd", "files[0].path"),
    ("a/../../b.pt", "files[0].path"),
    ("a\\..\\b.pt", "files[0].path"),
    ("C:evil.pt", "files[0].path"),
    ("a/\x00b", "files[0].path"),
    ("%2e%2e/x", "files[0].path"),
    ("a//b", "files[0].path"),
    ("./a", "files[0].path"),
    ("", "files[0].path"),
]


@pytest.mark.parametrize(("path", "field"), HOSTILE)
def test_hostile_paths_in_a_tree_are_refused(db: Any, client, seed, sim, storage_root, path, field):
    data = b"y" * 10
    body = _begin_body(sim, [{"path": path, "size": 10, "sha256": _sha(data)}], name="tree", kind="directory")
    res = client.post(f"/api/v1/runs/{sim.run}/uploads", json=body, headers=_auth(seed.token()))
    assert res.status_code == 422 and res.json()["error"]["field"] == field, res.text
    _nothing_written(db, storage_root, client, sim, seed.token())


@pytest.mark.parametrize(("name", "files", "field"), [
    ("../up", None, "name"),
    ("a/b", None, "name"),
    ("..", None, "name"),
    ("tree", [{"path": "a", "size": 1}, {"path": "a/b", "size": 1}], "files"),  # a file and a directory
    ("tree", [{"path": "a", "size": 1}, {"path": "a", "size": 1}], "files"),  # twice
    ("tree", [{"path": "a", "size": -1}], "files[0].size"),
    ("tree", [{"path": "a", "size": 1, "sha256": "ABC"}], "files[0].sha256"),
])
def test_bad_manifests_are_refused(db: Any, client, seed, sim, storage_root, name, files, field):
    files = files or [{"path": "a", "size": 1}]
    files = [{"sha256": _sha(b"z"), **f} for f in files]
    body = _begin_body(sim, files, name=name, kind="directory")
    res = client.post(f"/api/v1/runs/{sim.run}/uploads", json=body, headers=_auth(seed.token()))
    assert res.status_code == 422 and res.json()["error"]["field"] == field, res.text
    _nothing_written(db, storage_root, client, sim, seed.token())


def test_size_limits(db: Any, client, seed, sim, storage_root, monkeypatch):
    settings = client.app.state.context.settings  # the app's
    monkeypatch.setattr(settings, "upload_max_bytes", 1000)
    monkeypatch.setattr(settings, "upload_max_files", 2)
    big = _begin_body(sim, [{"path": "ckpt.pt", "size": 1001, "sha256": _sha(b"")}])
    res = client.post(f"/api/v1/runs/{sim.run}/uploads", json=big, headers=_auth(seed.token()))
    assert res.status_code == 413 and res.json()["error"]["field"] == "files"
    many = _begin_body(sim, [{"path": f"f{i}", "size": 1, "sha256": _sha(b"")} for i in range(3)], name="t",
                       kind="directory")
    res = client.post(f"/api/v1/runs/{sim.run}/uploads", json=many, headers=_auth(seed.token()))
    assert res.status_code == 413
    _nothing_written(db, storage_root, client, sim, seed.token())


def test_a_chunk_over_the_limit_is_refused_before_it_is_read(client, seed, sim, storage_root):
    size = 9 * 1024 * 1024
    body = _begin_body(sim, [{"path": "ckpt.pt", "size": size, "sha256": _sha(b"")}])
    up = client.post(f"/api/v1/runs/{sim.run}/uploads", json=body, headers=_auth(seed.token())).json()
    data = b"\0" * (8 * 1024 * 1024 + 1)
    res = client.put(f"/api/v1/runs/{sim.run}/uploads/{up['id']}/files/0?offset=0", content=data,
                     headers={**_auth(seed.token()), "X-Runcast-Chunk-Sha256": _sha(data)})
    assert res.status_code == 413 and res.json()["error"]["field"] == "body"
    assert not (storage_root / ".runcast-uploads" / up["id"]).exists()


def test_corrupted_chunk_is_rejected_and_a_bad_file_is_never_listed(client, seed, sim, storage_root):
    token = seed.token()
    good = os.urandom(300_000)
    body = _begin_body(sim, [{"path": "ckpt.pt", "size": len(good), "sha256": _sha(good)}])
    up = client.post(f"/api/v1/runs/{sim.run}/uploads", json=body, headers=_auth(token)).json()
    url = f"/api/v1/runs/{sim.run}/uploads/{up['id']}/files/0"
    # a chunk damaged on the way: its bytes do not match the sha256 sent with it
    damaged = bytearray(good[:100_000])
    damaged[500] ^= 0xFF
    res = client.put(f"{url}?offset=0", content=bytes(damaged), headers={**_auth(token), "X-Runcast-Chunk-Sha256": _sha(good[:100_000])})
    assert res.status_code == 422 and res.json()["error"]["field"] == "X-Runcast-Chunk-Sha256"
    again = client.post(f"/api/v1/runs/{sim.run}/uploads", json=body, headers=_auth(token)).json()
    assert (again["id"], again["files"][0]["received"]) == (up["id"], 0)  # nothing was written
    assert list(again["files"][0]) == ["index", "path", "size", "received"]  # the S3-only keys stay absent
    # a chunk at the wrong offset
    res = client.put(f"{url}?offset=5", content=good[:10], headers={**_auth(token), "X-Runcast-Chunk-Sha256": _sha(good[:10])})
    assert res.status_code == 409 and res.json()["error"]["field"] == "offset"
    # bytes that are self-consistent per chunk but not the file the manifest names
    wrong = bytearray(good)
    wrong[-1] ^= 0x01
    for offset in range(0, len(wrong), 100_000):
        piece = bytes(wrong[offset:offset + 100_000])
        res = client.put(f"{url}?offset={offset}", content=piece, headers={**_auth(token), "X-Runcast-Chunk-Sha256": _sha(piece)})
        assert res.status_code == 200, res.text
    res = client.post(f"/api/v1/runs/{sim.run}/uploads/{up['id']}/complete", headers=_auth(token))
    assert res.status_code == 422 and res.json()["error"]["field"] == "files[0].sha256"
    assert not (storage_root / ".runcast-uploads" / up["id"]).exists()
    assert not (storage_root / "demo" / sim.run).exists()
    assert client.get(f"/api/v1/runs/{sim.run}/checkpoints", headers=_auth(token)).json()["checkpoints"] == []
    res = client.post(f"/api/v1/runs/{sim.run}/uploads/{up['id']}/complete", headers=_auth(token))
    assert res.status_code == 409  # failed: begin again


def test_a_symlink_in_the_project_directory_cannot_redirect_an_upload(client, seed, sim, storage_root, tmp_path):
    outside = tmp_path / "outside"
    outside.mkdir()
    (storage_root / "demo").mkdir()
    os.symlink(outside, storage_root / "demo" / sim.run)
    data = b"q" * 5000
    token = seed.token()
    body = _begin_body(sim, [{"path": "ckpt.pt", "size": len(data), "sha256": _sha(data)}])
    up = client.post(f"/api/v1/runs/{sim.run}/uploads", json=body, headers=_auth(token)).json()
    res = client.put(f"/api/v1/runs/{sim.run}/uploads/{up['id']}/files/0?offset=0", content=data,
                     headers={**_auth(token), "X-Runcast-Chunk-Sha256": _sha(data)})
    assert res.status_code == 200
    res = client.post(f"/api/v1/runs/{sim.run}/uploads/{up['id']}/complete", headers=_auth(token))
    assert res.status_code == 422 and "symbolic link" in res.json()["error"]["message"]
    assert list(outside.iterdir()) == []
    assert not (storage_root / ".runcast-uploads" / up["id"]).exists()
    assert client.get(f"/api/v1/runs/{sim.run}/checkpoints", headers=_auth(token)).json()["checkpoints"] == []


def test_sdk_leaves_out_links_that_leave_the_checkpoint(client, seed, storage_root, tmp_path, monkeypatch):
    import runcast

    from artifacts.live import LiveServer

    secret = tmp_path / "secret.txt"
    secret.write_bytes(b"do not publish")
    ckpt = tmp_path / "trainer" / "checkpoint-1"
    ckpt.mkdir(parents=True)
    (ckpt / "model.bin").write_bytes(b"m" * 100)
    os.symlink(secret, ckpt / "leak.txt")
    os.symlink(ckpt / "model.bin", ckpt / "alias.bin")  # inside the tree: kept
    monkeypatch.setenv("RUNCAST_SPOOL_DIR", str(tmp_path / "spool"))
    with LiveServer(client.app) as live:
        run = runcast.init("demo", "links", server=live.url, token=seed.token(), capture_code=False, flush_interval=0.05)
        run.checkpoint(ckpt, step=1)
        run.finish(timeout=60)
    (listed,) = client.get(f"/api/v1/runs/{run.id}/checkpoints").json()["checkpoints"]
    files = client.get(listed["files_url"]).json()["files"]
    assert sorted(f["path"] for f in files) == ["alias.bin", "model.bin"]
    placed = storage_root / "demo" / run.id / "step-1" / "checkpoint-1"
    assert not any(p.is_symlink() for p in placed.rglob("*"))
