"""``runcast download`` against a real uvicorn server: resume after a cut, If-Range, sha256 checks."""

from __future__ import annotations

import hashlib
import json

import httpx
import pytest
from runcast.cli.download import DownloadError, download
from typer.testing import CliRunner

from artifacts.conftest import checkpoint_event, write_file
from artifacts.live import CuttingProxy, LiveServer

SIZE = 8 * 1024 * 1024 + 123


@pytest.fixture
def live(client):
    """The app on a real socket (the embedded client fixture has already migrated the database)."""
    with LiveServer(client.app) as server:
        yield server


@pytest.fixture
def published(seed, storage_root):
    sim = seed.run().start()
    sha = write_file(storage_root / "demo" / "ck" / "model.pt", SIZE, 3)
    sim.send([checkpoint_event(sim, "demo/ck/model.pt", 500, SIZE, sha)])
    return sim, sha


def _one_request_per_connection() -> httpx.Client:
    """No keep-alive, so the proxy sees each request on its own connection."""
    return httpx.Client(limits=httpx.Limits(max_keepalive_connections=0), timeout=60)


def _cid(client, run):
    return client.get(f"/api/v1/runs/{run}/checkpoints").json()["checkpoints"][0]["id"]


def test_resume_after_cut_sends_no_byte_twice(live, client, published, tmp_path):
    sim, sha = published
    # Connection 1 is the (small) checkpoint list; connection 2, the download, is cut.
    proxy = CuttingProxy(live.port, cut_after=3 * 1024 * 1024 + 7, cuts=2)
    try:
        with _one_request_per_connection() as http:
            result = download(proxy.url, sim.run, str(_cid(client, sim.run)), tmp_path / "out", client=http)
    finally:
        proxy.close()
    listing, first, second = proxy.connections  # list, the cut transfer, the resumed one
    assert first.request_header("Range") is None
    received_before_cut = first.body
    assert 0 < received_before_cut < SIZE
    assert second.request_header("Range") == f"bytes={received_before_cut}-"
    assert second.request_header("If-Range") == f'"{sha}"'
    assert second.body == SIZE - received_before_cut  # bytes re-sent beyond the last received byte: 0
    assert first.body + second.body == SIZE
    assert (result.sha256, result.verified, result.size, result.requests) == (sha, True, SIZE, 2)
    out = tmp_path / "out" / "model.pt"
    assert hashlib.sha256(out.read_bytes()).hexdigest() == sha
    assert not (tmp_path / "out" / "model.pt.part").exists()
    assert not (tmp_path / "out" / "model.pt.part.json").exists()


def test_second_invocation_resumes_partial(live, client, published, tmp_path):
    sim, sha = published
    cid = str(_cid(client, sim.run))
    proxy = CuttingProxy(live.port, cut_after=1024 * 1024, cuts=2)
    try:
        with pytest.raises(DownloadError, match="run the same command again to resume"), _one_request_per_connection() as http:
            download(proxy.url, sim.run, cid, tmp_path, retries=0, client=http)
        part = tmp_path / "model.pt.part"
        kept = part.stat().st_size
        assert 0 < kept < SIZE
        assert json.loads((tmp_path / "model.pt.part.json").read_text())["etag"] == f'"{sha}"'
        result = download(proxy.url, sim.run, cid, tmp_path)
    finally:
        proxy.close()
    assert (result.resumed_from, result.received) == (kept, SIZE - kept)
    assert proxy.connections[-1].request_header("Range") == f"bytes={kept}-"
    assert hashlib.sha256((tmp_path / "model.pt").read_bytes()).hexdigest() == sha


def test_changed_etag_restarts_from_zero(live, client, published, tmp_path):
    sim, sha = published
    (tmp_path / "model.pt.part").write_bytes(b"old bytes of another file")
    (tmp_path / "model.pt.part.json").write_text(json.dumps({"etag": '"' + "0" * 64 + '"'}))
    messages = []
    result = download(live.url, sim.run, str(_cid(client, sim.run)), tmp_path, log=messages.append)
    assert result.sha256 == sha and result.received == SIZE
    assert "the checkpoint changed on the server since the partial download; starting over" in messages


def test_sha_mismatch_deletes_or_keeps_partial(live, client, published, tmp_path):
    sim, sha = published
    cid = str(_cid(client, sim.run))
    for keep in (False, True):
        (tmp_path / "model.pt.part").write_bytes(b"\x00" * 1000)  # right ETag, wrong bytes
        (tmp_path / "model.pt.part.json").write_text(json.dumps({"etag": f'"{sha}"'}))
        with pytest.raises(DownloadError, match="sha256 mismatch") as err:
            download(live.url, sim.run, cid, tmp_path, keep_partial=keep)
        assert (tmp_path / "model.pt.part").exists() is keep
        assert ("is kept as" in str(err.value)) is keep
        assert not (tmp_path / "model.pt").exists()


def test_cli_latest_and_already_downloaded(live, client, published, tmp_path):
    sim, sha = published
    runner = CliRunner()
    from runcast.cli.main import app

    res = runner.invoke(app, ["download", sim.run, "latest", "-o", str(tmp_path), "--server", live.url, "-q"])
    assert res.exit_code == 0, res.output
    assert f"sha256 {sha}  verified" in res.output
    res = runner.invoke(app, ["download", sim.run, "step:500", "-o", str(tmp_path), "--server", live.url, "-q"])
    assert res.exit_code == 0 and "already downloaded and verified" in res.output
    res = runner.invoke(app, ["download", sim.run, "step:7", "-o", str(tmp_path), "--server", live.url])
    assert res.exit_code == 3 and "no checkpoint at step 7" in res.output  # not found


def test_cli_private_checkpoint_needs_token(live, seed, storage_root, tmp_path):
    sim = seed.run().start()
    sha = write_file(storage_root / "demo" / "priv.pt", 4096)
    sim.send([checkpoint_event(sim, "demo/priv.pt", 1, 4096, sha, public=False)])
    from runcast.cli.main import app

    runner = CliRunner()
    res = runner.invoke(app, ["download", sim.run, "step:1", "-o", str(tmp_path), "--server", live.url])
    assert res.exit_code == 4 and "is private" in res.output and "--token" in res.output  # refused
    res = runner.invoke(
        app, ["download", sim.run, "step:1", "-o", str(tmp_path), "--server", live.url, "--token", seed.token(), "-q"]
    )
    assert res.exit_code == 0, res.output
    assert hashlib.sha256((tmp_path / "priv.pt").read_bytes()).hexdigest() == sha


def test_server_stops_reading_when_the_client_goes(live, client, seed, storage_root, monkeypatch):
    """A client that disconnects early costs the server a few chunk reads, not the whole file."""
    import socket
    import time
    from dataclasses import replace

    size = 64 * 1024 * 1024
    sim = seed.run().start()
    write_file(storage_root / "demo" / "big.pt", size, 9)
    sim.send([checkpoint_event(sim, "demo/big.pt", 1, size, None)])
    reads, closed = [], []

    class Counting:
        def __init__(self, inner):
            self.inner = inner

        def locate(self, path, within=None):
            return self.inner.locate(path, within)

        def open(self, obj):
            reader = self.inner.open(obj)

            class R:
                def read_at(self, offset, n):
                    reads.append(n)
                    return reader.read_at(offset, n)

                def close(self):
                    closed.append(True)
                    reader.close()

            return R()

    ctx = client.app.state.context  # the routes read the storage of the app's context
    monkeypatch.setattr(client.app.state, "context", replace(ctx, storage=Counting(ctx.storage)))
    path = client.get(f"/api/v1/runs/{sim.run}/checkpoints").json()["checkpoints"][0]["download_url"]
    with socket.create_connection(("127.0.0.1", live.port)) as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 64 * 1024)
        s.sendall(f"GET {path} HTTP/1.1\r\nHost: x\r\n\r\n".encode())
        assert s.recv(65536)
    deadline = time.monotonic() + 10
    while not closed and time.monotonic() < deadline:
        time.sleep(0.05)
    assert closed == [True]
    chunk = reads[0]
    assert sum(reads) <= 8 * chunk < size, (len(reads), chunk)


def test_two_files_at_a_step_are_listed_not_picked_and_a_different_file_is_not_overwritten(live, seed, storage_root,
                                                                                           tmp_path):
    sim = seed.run().start()
    model = write_file(storage_root / "demo" / "two" / "model.pt", 4096, 1)
    optim = write_file(storage_root / "demo" / "two" / "optim.pt", 2048, 2)
    sim.send([checkpoint_event(sim, "demo/two/model.pt", 100, 4096, model),
              checkpoint_event(sim, "demo/two/optim.pt", 100, 2048, optim)])
    from runcast.cli.main import app

    runner = CliRunner()
    out = tmp_path / "out"
    base = ["-o", str(out), "--server", live.url, "-q"]
    res = runner.invoke(app, ["download", sim.run, "step:100", *base])
    assert res.exit_code == 2, res.output  # refused: which one?
    listed = {c["filename"]: c["id"] for c in httpx.get(f"{live.url}/api/v1/runs/{sim.run}/checkpoints", timeout=30).json()["checkpoints"]}
    assert "2 checkpoints at step 100" in res.output
    for name, cid in listed.items():
        assert f"{cid}  {name}" in res.output  # the candidates, by id, the way to choose one
    assert not out.exists() or list(out.iterdir()) == []

    out.mkdir(exist_ok=True)
    (out / "model.pt").write_bytes(b"my own model.pt, not the run's")
    res = runner.invoke(app, ["download", sim.run, str(listed["model.pt"]), *base])
    assert res.exit_code == 2 and "--overwrite" in res.output, res.output
    assert (out / "model.pt").read_bytes() == b"my own model.pt, not the run's"
    res = runner.invoke(app, ["download", sim.run, str(listed["model.pt"]), "--overwrite", *base])
    assert res.exit_code == 0, res.output
    assert hashlib.sha256((out / "model.pt").read_bytes()).hexdigest() == model
