"""End to end: a run with ``init(checkpoint_dir=<storage root>)`` against a real uvicorn server.

The trainer saves outside the storage root; the SDK copies the file in (off the
training thread), the event names the copy, and the server lists and serves it with
the sha256 the SDK computed while copying.
"""

from __future__ import annotations

import hashlib

import httpx
import pytest

from artifacts.conftest import write_file
from artifacts.live import LiveServer


@pytest.fixture
def live(client):
    with LiveServer(client.app) as server:
        yield server


def test_copied_checkpoint_is_listed_and_downloadable(live, client, seed, storage_root, tmp_path, monkeypatch):
    import runcast

    monkeypatch.setenv("RUNCAST_SPOOL_DIR", str(tmp_path / "spool"))
    work = tmp_path / "trainer-out"  # not under the storage root
    size = 2 * 1024 * 1024 + 5
    sha = write_file(work / "last.pt", size, 4)
    run = runcast.init(
        "demo", "copy", server=live.url, token=seed.token(), checkpoint_dir=storage_root,
        capture_code=False, flush_interval=0.05,
    )
    run.checkpoint(work / "last.pt", step=100)
    run.finish(timeout=30)

    (listed,) = client.get(f"/api/v1/runs/{run.id}/checkpoints").json()["checkpoints"]
    assert (listed["status"], listed["sha256"], listed["size"], listed["filename"]) == ("available", sha, size, "last.pt")
    assert (storage_root / "demo" / run.id / "step-100" / "last.pt").stat().st_size == size
    assert (work / "last.pt").exists()
    with httpx.Client(base_url=live.url, timeout=60) as http:
        res = http.get(listed["download_url"], headers={"Range": "bytes=1-"})
        assert res.status_code == 206 and res.headers["etag"] == f'"{sha}"'
        assert hashlib.sha256((work / "last.pt").read_bytes()[:1] + res.content).hexdigest() == sha
