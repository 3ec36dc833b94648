"""Checkpoints published over HTTP by the SDK (docs/artifacts.md#publishing-checkpoints-over-http).

The trainer's files live outside the server's storage root: nothing is shared but HTTP.
A real uvicorn server runs the embedded app in a thread; the SDK is the real one.
"""

from __future__ import annotations

import hashlib
import io
import tarfile
import time

import httpx
import pytest

from artifacts.conftest import write_file
from artifacts.live import LiveServer


@pytest.fixture
def live(client):
    with LiveServer(client.app) as server:
        yield server


def _init(live, seed, tmp_path, monkeypatch, **kwargs):
    import runcast

    monkeypatch.setenv("RUNCAST_SPOOL_DIR", str(tmp_path / "spool"))
    return runcast.init("demo", "upload", server=live.url, token=seed.token(), capture_code=False,
                        flush_interval=0.05, **kwargs)


def test_file_checkpoint_is_uploaded_verified_and_served(live, client, seed, storage_root, tmp_path, monkeypatch):
    work = tmp_path / "trainer"
    size = 20 * 1024 * 1024 + 7  # three chunks of 8 MiB
    sha = write_file(work / "last.pt", size, 1)
    run = _init(live, seed, tmp_path, monkeypatch)
    run.log({"loss": 1.0}, step=0)
    run.checkpoint(work / "last.pt", step=100, metrics={"val/loss": 2.5})
    run.finish(timeout=60)
    up = run.stats.uploads
    assert (up.pending, up.done, up.failed, up.bytes_total, up.bytes_done, up.bytes_sent) == (0, 1, 0, size, size, size)
    (listed,) = client.get(f"/api/v1/runs/{run.id}/checkpoints", headers={"Authorization": f"Bearer {seed.token()}"}).json()["checkpoints"]
    assert (listed["status"], listed["sha256"], listed["size"], listed["step"], listed["metrics"]) == (
        "available", sha, size, 100, {"val/loss": 2.5})
    stored = storage_root / "demo" / run.id / "step-100" / "last.pt"
    assert hashlib.sha256(stored.read_bytes()).hexdigest() == sha
    assert not any((storage_root / ".runcast-uploads").iterdir())
    with httpx.Client(base_url=live.url, timeout=60) as http:
        body = http.get(listed["download_url"]).content
    assert hashlib.sha256(body).hexdigest() == sha


def _tree(root, files):
    """Write ``{relative path: size}`` under ``root``; returns {relative path: sha256}."""
    return {rel: write_file(root / rel, size, i) for i, (rel, size) in enumerate(sorted(files.items()))}


HF_TREE = {  # the shape of a transformers checkpoint-N/ and a DeepSpeed tag
    "config.json": 700, "model.safetensors": 3 * 1024 * 1024 + 11, "optimizer.pt": 5 * 1024 * 1024,
    "trainer_state.json": 0, "global_step40/mp_rank_00_model_states.pt": 9 * 1024 * 1024 + 3,
    "global_step40/zero_pp_rank_0_mp_rank_00_optim_states.pt": 1024, "latest": 12,
}


def test_directory_checkpoint_round_trip(live, client, seed, storage_root, tmp_path, monkeypatch):
    ckpt = tmp_path / "trainer" / "checkpoint-40"
    hashes = _tree(ckpt, HF_TREE)
    run = _init(live, seed, tmp_path, monkeypatch)
    run.checkpoint(ckpt, step=40)
    run.finish(timeout=60)
    assert run.stats.uploads.done == 1
    (listed,) = client.get(f"/api/v1/runs/{run.id}/checkpoints").json()["checkpoints"]
    assert (listed["status"], listed["kind"], listed["filename"], listed["size"]) == (
        "available", "directory", "checkpoint-40", sum(HF_TREE.values()))
    files = client.get(listed["files_url"]).json()["files"]
    assert {f["path"]: (f["size"], f["sha256"]) for f in files} == {p: (HF_TREE[p], h) for p, h in hashes.items()}
    with httpx.Client(base_url=live.url, timeout=60) as http:
        one = files[[f["path"] for f in files].index("global_step40/mp_rank_00_model_states.pt")]
        res = http.get(one["download_url"], headers={"Range": "bytes=5-"})
        assert res.status_code == 206 and res.headers["etag"] == f'"{one["sha256"]}"'
        with http.stream("GET", listed["download_url"]) as res:
            assert res.headers["content-type"] == "application/x-tar"
            assert "content-length" not in res.headers  # streamed as it is read
            data = b"".join(res.iter_bytes())
    got = {}
    with tarfile.open(fileobj=io.BytesIO(data), mode="r|") as tar:
        for member in tar:
            assert member.isfile() and member.name.startswith("checkpoint-40/")
            body = tar.extractfile(member).read()
            rel = member.name.removeprefix("checkpoint-40/")
            assert member.pax_headers["RUNCAST.sha256"] == hashlib.sha256(body).hexdigest()
            got[rel] = hashlib.sha256(body).hexdigest()
    assert got == hashes
    # runcast download: the tree file by file, each verified
    from runcast.cli.download import download

    result = download(live.url, run.id, "latest", tmp_path / "dl")
    assert (result.path, result.size, result.verified) == (tmp_path / "dl" / "checkpoint-40", sum(HF_TREE.values()), True)
    fetched = {p.relative_to(result.path).as_posix(): hashlib.sha256(p.read_bytes()).hexdigest()
               for p in result.path.rglob("*") if p.is_file()}
    assert fetched == hashes


def test_checkpoint_in_the_servers_storage_is_not_sent(live, client, seed, storage_root, tmp_path, monkeypatch):
    path = storage_root / "demo" / "shared" / "step5.pt"
    sha = write_file(path, 3 * 1024 * 1024, 2)
    run = _init(live, seed, tmp_path, monkeypatch)
    run.checkpoint(path, step=5)
    run.finish(timeout=60)
    up = run.stats.uploads
    assert (up.done, up.bytes_sent) == (1, 0)
    (listed,) = client.get(f"/api/v1/runs/{run.id}/checkpoints").json()["checkpoints"]
    assert (listed["status"], listed["sha256"], listed["filename"]) == ("available", sha, "step5.pt")
    assert not (storage_root / "demo" / run.id).exists()


def test_metrics_and_progress_flow_while_a_checkpoint_uploads(live, client, seed, storage_root, tmp_path, monkeypatch):
    size = 6 * 1024 * 1024
    write_file(tmp_path / "trainer" / "big.pt", size, 3)
    run = _init(live, seed, tmp_path, monkeypatch, upload_bandwidth=1024 * 1024)  # ~6 s for the file
    run.checkpoint(tmp_path / "trainer" / "big.pt", step=1)
    seen_progress = []
    for step in range(40):
        run.log({"loss": float(step)}, step=step)
        stats = run.stats.uploads
        if stats.pending:
            seen_progress.append(stats.bytes_sent)
        time.sleep(0.02)

    def stored() -> int:
        res = client.get(f"/api/v1/runs/{run.id}/metrics", params={"key": "loss"})
        return sum(res.json()["series"][0]["count"]) if res.status_code == 200 and res.json()["series"] else 0

    deadline = time.monotonic() + 3
    while stored() < 40 and time.monotonic() < deadline:
        time.sleep(0.05)
    # every point was delivered while the checkpoint was still on its way
    assert (stored(), run.stats.uploads.pending) == (40, 1)
    deadline = time.monotonic() + 5
    while run.stats.uploads.pending and time.monotonic() < deadline:
        seen_progress.append(run.stats.uploads.bytes_sent)  # run.stats shows the upload moving
        time.sleep(0.1)
    run.finish(timeout=60)
    assert seen_progress == sorted(seen_progress) and any(0 < sent < size for sent in seen_progress)
    assert run.stats.uploads.done == 1
