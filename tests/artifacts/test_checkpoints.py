"""Checkpoint list, statuses and downloads (Range, If-Range, HEAD, ETag) through the embedded app."""

from __future__ import annotations

import hashlib

from artifacts.conftest import checkpoint_event, write_file


def _ids(client, run):
    return {c["step"]: c for c in client.get(f"/api/v1/runs/{run}/checkpoints").json()["checkpoints"]}


def test_list_statuses_available_pruned_private_missing(client, seed, storage_root):
    sim = seed.run().start()
    sha1 = write_file(storage_root / "demo" / "ckpt" / "step100.pt", 5000, 1)
    sha2 = write_file(storage_root / "demo" / "ckpt" / "step200.pt", 6000, 2)
    sha3 = write_file(storage_root / "demo" / "ckpt" / "step300.pt", 7000, 3)
    sim.send(
        [
            checkpoint_event(sim, str(storage_root / "demo" / "ckpt" / "step100.pt"), 100, 5000, sha1, metrics={"val/loss": 2.5}),
            checkpoint_event(sim, "demo/ckpt/step200.pt", 200, 6000, sha2),
            checkpoint_event(sim, "demo/ckpt/step300.pt", 300, 7000, sha3, public=False),
            checkpoint_event(sim, "demo/ckpt/step400.pt", 400, 10, None),  # never written
            checkpoint_event(sim, str(storage_root / "demo" / "ckpt" / "step100.pt"), 100, 0, None, status="pruned"),
        ]
    )
    listed = _ids(client, sim.run)
    assert {s: c["status"] for s, c in listed.items()} == {
        100: "pruned",
        200: "available",
        300: "private",
        400: "missing",
    }
    assert listed[100]["metrics"] == {"val/loss": 2.5} and listed[100]["sha256"] == sha1
    assert listed[100]["download_url"] is None and listed[300]["download_url"] is None
    assert listed[200]["download_url"] == f"/api/v1/runs/{sim.run}/checkpoints/{listed[200]['id']}/download"
    assert (listed[200]["size"], listed[200]["filename"]) == (6000, "step200.pt")
    assert listed[400]["reason"] == "no such file under the storage root"
    # Private to other viewers: listed, without its file.
    assert {k: listed[300][k] for k in ("size", "sha256", "filename", "kind", "card_url")} == dict.fromkeys(
        ("size", "sha256", "filename", "kind", "card_url"))

    token = seed.token()
    with_token = {
        c["step"]: c["status"]
        for c in client.get(
            f"/api/v1/runs/{sim.run}/checkpoints", headers={"Authorization": f"Bearer {token}"}
        ).json()["checkpoints"]
    }
    assert with_token[300] == "available"

    base = f"/api/v1/runs/{sim.run}/checkpoints"
    assert client.get(f"{base}/{listed[100]['id']}/download").status_code == 410
    # A private checkpoint is as unknown as an id that does not exist, to anyone but its project.
    unknown = client.get(f"{base}/999999/download")
    other = seed.token("other-project")
    for headers in ({}, {"Authorization": f"Bearer {other}"}):
        for what in ("download", "card"):
            res = client.get(f"{base}/{listed[300]['id']}/{what}", headers=headers)
            assert (res.status_code, res.json()) == (404, unknown.json())
    ok = client.get(f"{base}/{listed[300]['id']}/download", headers={"Authorization": f"Bearer {token}"})
    assert ok.status_code == 200 and hashlib.sha256(ok.content).hexdigest() == sha3
    assert client.get(f"{base}/{listed[400]['id']}/download").status_code == 404
    assert client.get(f"{base}/999999/download").status_code == 404


def test_download_headers_range_if_range_head(client, seed, storage_root):
    sim = seed.run().start()
    size = 3 * 1024 * 1024 + 17
    sha = write_file(storage_root / "demo" / "run a" / "model é.pt", size, 7)
    sim.send([checkpoint_event(sim, "demo/run a/model é.pt", 10, size, sha)])
    cid = _ids(client, sim.run)[10]["id"]
    url = f"/api/v1/runs/{sim.run}/checkpoints/{cid}/download"
    data = (storage_root / "demo" / "run a" / "model é.pt").read_bytes()

    full = client.get(url)
    assert full.status_code == 200 and full.content == data
    h = full.headers
    assert (h["etag"], h["content-length"], h["accept-ranges"]) == (f'"{sha}"', str(size), "bytes")
    assert h["content-disposition"] == "attachment; filename=\"model _.pt\"; filename*=UTF-8''model%20%C3%A9.pt"

    head = client.head(url)
    assert head.status_code == 200 and head.content == b"" and head.headers["content-length"] == str(size)
    assert head.headers["etag"] == f'"{sha}"'

    part = client.get(url, headers={"Range": "bytes=100-199"})
    assert part.status_code == 206 and part.content == data[100:200]
    assert part.headers["content-range"] == f"bytes 100-199/{size}" and part.headers["content-length"] == "100"
    tail = client.get(url, headers={"Range": f"bytes={size - 5}-"})
    assert tail.status_code == 206 and tail.content == data[-5:]
    suffix = client.get(url, headers={"Range": "bytes=-10"})
    assert suffix.status_code == 206 and suffix.content == data[-10:]
    clipped = client.get(url, headers={"Range": f"bytes={size - 3}-{size + 1000}"})
    assert clipped.status_code == 206 and clipped.content == data[-3:]

    bad = client.get(url, headers={"Range": f"bytes={size}-"})
    assert bad.status_code == 416 and bad.headers["content-range"] == f"bytes */{size}"
    # Unparseable or multi-range headers are ignored: the whole file (RFC 9110).
    for header in ("bytes=5-1", "items=0-5", "bytes=0-1,5-6", "bytes=abc"):
        res = client.get(url, headers={"Range": header})
        assert (res.status_code, len(res.content)) == (200, size), header

    same = client.get(url, headers={"Range": "bytes=1000-", "If-Range": f'"{sha}"'})
    assert same.status_code == 206 and same.content == data[1000:]
    changed = client.get(url, headers={"Range": "bytes=1000-", "If-Range": '"' + "0" * 64 + '"'})
    assert changed.status_code == 200 and changed.content == data
    weak = client.get(url, headers={"Range": "bytes=1000-", "If-Range": f'W/"{sha}"'})
    assert weak.status_code == 200

    head_range = client.head(url, headers={"Range": "bytes=0-9"})
    assert head_range.status_code == 206 and head_range.headers["content-length"] == "10"


def test_downloads_are_never_compressed(client, seed, storage_root):
    """Static files go out gzip/br; a checkpoint never does, so byte ranges and sizes stay the file's."""
    sim = seed.run().start()
    data = b'{"weights": [' + b"0.0, " * 200_000 + b"1.0]}"  # as compressible as a file gets
    (storage_root / "demo").mkdir(parents=True, exist_ok=True)
    (storage_root / "demo" / "state.json").write_bytes(data)
    sim.send([checkpoint_event(sim, "demo/state.json", 7, len(data), hashlib.sha256(data).hexdigest())])
    url = f"/api/v1/runs/{sim.run}/checkpoints/{_ids(client, sim.run)[7]['id']}/download"
    accept = {"Accept-Encoding": "br, gzip, deflate, zstd"}

    with client.stream("GET", url, headers=accept) as full:
        body = b"".join(full.iter_raw())
    assert full.status_code == 200 and "content-encoding" not in full.headers
    assert body == data and full.headers["content-length"] == str(len(data))

    with client.stream("GET", url, headers={**accept, "Range": "bytes=1000-1999"}) as part:
        body = b"".join(part.iter_raw())
    assert part.status_code == 206 and "content-encoding" not in part.headers
    assert body == data[1000:2000] and part.headers["content-range"] == f"bytes 1000-1999/{len(data)}"
    head = client.head(url, headers={**accept, "Range": "bytes=-10"})
    assert head.status_code == 206 and "content-encoding" not in head.headers and head.headers["content-length"] == "10"


def test_file_changed_size_or_overwritten_is_missing(client, seed, storage_root):
    sim = seed.run().start()
    sha = write_file(storage_root / "demo" / "a.pt", 1000)
    sim.send([checkpoint_event(sim, "demo/a.pt", 1, 1000, sha)])
    with open(storage_root / "demo" / "a.pt", "ab") as f:
        f.write(b"x")
    (c,) = client.get(f"/api/v1/runs/{sim.run}/checkpoints").json()["checkpoints"]
    assert (c["status"], c["reason"]) == ("missing", "the file is no longer the recorded size")

    sha2 = write_file(storage_root / "demo" / "b.pt", 500, 1)
    sim.send([checkpoint_event(sim, "demo/b.pt", 2, 500, sha2)])
    sha3 = write_file(storage_root / "demo" / "b.pt", 500, 2)
    sim.send([checkpoint_event(sim, "demo/b.pt", 3, 500, sha3)])
    listed = _ids(client, sim.run)
    assert listed[2]["status"] == "missing" and listed[2]["reason"].startswith("overwritten by checkpoint")
    assert listed[3]["status"] == "available"


def test_directory_checkpoint_written_in_place_downloads_as_tar(client, seed, storage_root, tmp_path):
    """A tree the trainer wrote into the storage itself (no manifest): tar and files, sha256 unknown, no links."""
    import io
    import os
    import tarfile

    sim = seed.run().start()
    tag = storage_root / "demo" / "ds" / "global_step5"
    (tag / "sub").mkdir(parents=True)
    (tag / "model.bin").write_bytes(b"m" * 10)
    (tag / "sub" / "optim.bin").write_bytes(b"o" * 3)
    (tmp_path / "secret").write_bytes(b"s")
    os.symlink(tmp_path / "secret", tag / "leak")  # neither followed nor listed
    sim.send([checkpoint_event(sim, "demo/ds/global_step5", 5, 13, None)])
    (c,) = client.get(f"/api/v1/runs/{sim.run}/checkpoints").json()["checkpoints"]
    assert (c["status"], c["kind"]) == ("available", "directory")
    files = client.get(c["files_url"]).json()["files"]
    assert [(f["path"], f["size"], f["sha256"]) for f in files] == [("model.bin", 10, None), ("sub/optim.bin", 3, None)]
    res = client.get(c["download_url"])
    assert res.status_code == 200 and res.headers["content-disposition"] == 'attachment; filename="global_step5.tar"'
    with tarfile.open(fileobj=io.BytesIO(res.content), mode="r|") as tar:
        got = {m.name: tar.extractfile(m).read() for m in tar}
    assert got == {"global_step5/model.bin": b"m" * 10, "global_step5/sub/optim.bin": b"o" * 3}
    assert client.get(f"{c['files_url']}/sub/optim.bin").content == b"o" * 3
    assert client.get(f"{c['files_url']}/leak").status_code == 404
    assert client.get(f"{c['files_url']}/../../secret").status_code == 404


def test_private_run_checkpoints_hidden(client, seed, storage_root):
    sim = seed.run().start(visibility="private")
    sha = write_file(storage_root / "demo" / "p.pt", 10)
    sim.send([checkpoint_event(sim, "demo/p.pt", 1, 10, sha)])
    assert client.get(f"/api/v1/runs/{sim.run}/checkpoints").status_code == 404
    token = seed.token()
    res = client.get(f"/api/v1/runs/{sim.run}/checkpoints", headers={"Authorization": f"Bearer {token}"})
    assert [c["status"] for c in res.json()["checkpoints"]] == ["available"]
    cid = res.json()["checkpoints"][0]["id"]
    got = client.get(f"/api/v1/runs/{sim.run}/checkpoints/{cid}/download", headers={"Authorization": f"Bearer {token}"})
    assert got.status_code == 200 and got.headers["cache-control"] == "private, no-cache"  # never in a shared cache


def test_trainer_root_mapping(storage_root, embedded_env, monkeypatch, seed):
    """An absolute path under RUNCAST_STORAGE_TRAINER_ROOT is mapped onto the storage root."""
    from fastapi.testclient import TestClient
    from runcast_server.app import create_app

    monkeypatch.setenv("RUNCAST_STORAGE_TRAINER_ROOT", "/mnt/shared/ckpts")
    sha = write_file(storage_root / "demo" / "r1" / "s.pt", 64)
    sim = seed.run().start()
    sim.send([checkpoint_event(sim, "/mnt/shared/ckpts/demo/r1/s.pt", 1, 64, sha)])
    with TestClient(create_app()) as c:
        (ck,) = c.get(f"/api/v1/runs/{sim.run}/checkpoints").json()["checkpoints"]
        assert ck["status"] == "available"
        assert hashlib.sha256(c.get(ck["download_url"]).content).hexdigest() == sha
