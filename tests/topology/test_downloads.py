"""Checkpoint downloads handed to nginx (X-Accel-Redirect): the app still decides who may
read what; nginx sends the bytes, with Range, If-Range and HEAD intact."""

from __future__ import annotations

import hashlib
import os
import shutil
import tempfile
import time
from pathlib import Path
from typing import Any

import httpx
import pytest
from conftest import Processes
from runcast.wire import events as ev

from topology.nginx import Nginx

PREFIX = "/_runcast_files/"


def write_file(path: Path, size: int) -> str:
    path.parent.mkdir(parents=True, exist_ok=True)
    os.chmod(path.parent.parent, 0o755)
    os.chmod(path.parent, 0o755)
    data = (hashlib.sha256(path.name.encode()).digest() * (size // 32 + 1))[:size]
    path.write_bytes(data)
    os.chmod(path, 0o644)
    return hashlib.sha256(data).hexdigest()


def post(base: str, token: str, events: list[dict[str, Any]]) -> None:
    r = httpx.post(f"{base}/api/v1/ingest", json={"v": 1, "events": events},
                   headers={"Authorization": f"Bearer {token}"}, timeout=30)
    assert r.status_code == 202, r.text


@pytest.fixture(scope="module")
def proxied(request, tmp_path_factory):  # type: ignore[no-untyped-def]
    """An embedded ``runcast serve`` with the accel setting, nginx in front, and two runs of
    project demo: a public one (a public and a private checkpoint) and a private one.
    Shared by the tests of this module (they only read)."""
    tmp = tmp_path_factory.mktemp("proxied")
    files_root = Path(tempfile.mkdtemp(prefix="runcast-files-"))
    files_root.chmod(0o755)
    processes = Processes(request, tmp)
    proxy = None
    try:
        data = {"RUNCAST_DATA_DIR": str(tmp / "data"), "RUNCAST_STORAGE_ROOT": str(files_root)}
        token = processes.cli("token", "create", "--project", "demo", **data).stdout.strip().splitlines()[-1]
        processes.start_api(**data, RUNCAST_DOWNLOAD_ACCEL_PREFIX=PREFIX)
        proxy = Nginx([processes.api_url], files_root, tmp / "logs").start()
        yield seed(processes, proxy, token, files_root)
    finally:
        if proxy is not None:
            proxy.stop()
        processes.stop()
        shutil.rmtree(files_root, ignore_errors=True)


def seed(processes: Processes, proxy: Nginx, token: str, files_root: Path) -> dict[str, Any]:
    files = {
        "public": ("demo/ck pt/step 1000 é.bin", 3_000_001),
        "hidden": ("demo/ckpt/hidden.bin", 10_000),
        "private": ("demo/ckpt/private-run.bin", 10_000),
    }
    shas = {name: write_file(files_root / rel, size) for name, (rel, size) in files.items()}
    runs = {}
    for name, visibility in (("public", "public"), ("private", "private")):
        run, seg = ev.new_id(), ev.new_id()
        runs[name] = run
        base = {"v": 1, "run": run, "segment": seg, "ts": time.time()}
        events = [{**base, "type": "run_started", "project": "demo", "name": name, "visibility": visibility, "seq": 0}]
        keys = ("public", "hidden") if name == "public" else ("private",)
        for i, key in enumerate(keys, start=1):
            rel, size = files[key]
            events.append({**base, "type": "checkpoint", "step": 1000 * i, "path": rel, "size": size,
                           "sha256": shas[key], "public": key != "hidden", "seq": i})
        post(proxy.url, token, events)
    return {"proxy": proxy, "api": processes.api_url, "token": token, "runs": runs, "shas": shas, "files": files,
            "processes": processes}


def checkpoint_urls(base: str, run: str, token: str | None = None) -> dict[int, str]:
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    r = httpx.get(f"{base}/api/v1/runs/{run}/checkpoints", headers=headers, timeout=30)
    assert r.status_code == 200, r.text
    return {c["step"]: c["download_url"] for c in r.json()["checkpoints"]}


def test_nginx_sends_the_file_with_the_apps_headers_range_and_resume(proxied):
    proxy, api, run = proxied["proxy"], proxied["api"], proxied["runs"]["public"]
    sha, (_, size) = proxied["shas"]["public"], proxied["files"]["public"]
    url = proxy.url + checkpoint_urls(proxy.url, run)[1000]

    # Straight to the API: the empty body with the hand-off header (what nginx acts on).
    direct = httpx.get(api + url.removeprefix(proxy.url), timeout=30)
    assert direct.status_code == 200 and direct.content == b""
    assert direct.headers["x-accel-redirect"] == PREFIX + "demo/ck%20pt/step%201000%20%C3%A9.bin"

    whole = httpx.get(url, timeout=30)
    assert whole.status_code == 200, whole.text
    assert "x-accel-redirect" not in whole.headers
    assert hashlib.sha256(whole.content).hexdigest() == sha and len(whole.content) == size
    assert whole.headers["etag"] == f'"{sha}"'
    assert whole.headers["content-type"] == "application/octet-stream"
    assert whole.headers["content-disposition"] == direct.headers["content-disposition"]
    assert whole.headers["accept-ranges"] == "bytes"
    assert whole.headers["x-content-type-options"] == "nosniff"
    assert whole.headers.get("content-encoding") is None  # never gzipped

    head = httpx.head(url, timeout=30)
    assert head.status_code == 200 and head.headers["content-length"] == str(size) and head.content == b""

    # A resume: the second half, validated by the ETag the first response carried.
    half = size // 2
    rest = httpx.get(url, headers={"Range": f"bytes={half}-", "If-Range": whole.headers["etag"]}, timeout=30)
    assert rest.status_code == 206
    assert rest.headers["content-range"] == f"bytes {half}-{size - 1}/{size}"
    assert whole.content[:half] + rest.content == whole.content
    # A changed file (another ETag): the whole file again, never a glued one.
    stale = httpx.get(url, headers={"Range": f"bytes={half}-", "If-Range": '"' + "0" * 64 + '"'}, timeout=30)
    assert stale.status_code == 200 and stale.content == whole.content
    suffix = httpx.get(url, headers={"Range": "bytes=-10"}, timeout=30)
    assert suffix.status_code == 206 and suffix.content == whole.content[-10:]
    # Past the end: the API's own JSON 416, as without nginx.
    past = httpx.get(url, headers={"Range": f"bytes={size}-"}, timeout=30)
    assert past.status_code == 416 and past.headers["content-range"] == f"bytes */{size}"
    assert past.json()["error"]["field"] == "Range"


def test_visibility_stays_in_the_app_and_the_internal_location_is_closed(proxied):
    proxy, token, runs, files = proxied["proxy"], proxied["token"], proxied["runs"], proxied["files"]
    processes = proxied["processes"]
    other = processes.cli("token", "create", "--project", "other",
                          RUNCAST_DATA_DIR=str(processes.tmp / "data")).stdout.strip().splitlines()[-1]

    # A private checkpoint of a public run, and the checkpoint of a private run.
    hidden = checkpoint_urls(proxy.url, runs["public"], token)[2000]
    private = checkpoint_urls(proxy.url, runs["private"], token)[1000]
    for path in (hidden, private):
        for who in (None, other, "rc_not-a-token"):
            headers = {"Authorization": f"Bearer {who}"} if who else {}
            r = httpx.get(proxy.url + path, headers=headers, timeout=30)
            assert r.status_code in (401, 404), (path, who, r.status_code)
            assert r.json()["error"], r.text
            assert "x-accel-redirect" not in r.headers
        owner = httpx.get(proxy.url + path, headers={"Authorization": f"Bearer {token}"}, timeout=30)
        assert owner.status_code == 200 and len(owner.content) == 10_000
        assert owner.headers["cache-control"] == "private, no-cache"  # a private checkpoint, or a private run's

    # The internal location answers nobody from outside, whatever the spelling.
    for rel in (files["private"][0], files["hidden"][0], "demo/ckpt/", ""):
        for spelling in (PREFIX + rel, PREFIX.rstrip("/") + "/./" + rel, "/x/.." + PREFIX + rel,
                         PREFIX.replace("_", "%5F") + rel):
            r = httpx.get(proxy.url + spelling, timeout=30)
            assert r.status_code == 404, (spelling, r.status_code)
            assert len(r.content) < 1000
    # A client cannot make nginx follow an X-Accel-Redirect header it sends itself.
    r = httpx.get(f"{proxy.url}/healthz", headers={"X-Accel-Redirect": PREFIX + files["private"][0]}, timeout=30)
    assert r.status_code == 200 and r.json()["status"] == "ok"


def test_the_site_compresses_json_never_the_stream_and_refuses_huge_bodies_as_json(proxied):
    proxy, token, run = proxied["proxy"], proxied["token"], proxied["runs"]["public"]
    api = httpx.get(f"{proxy.url}/openapi.json", headers={"Accept-Encoding": "gzip"}, timeout=30)
    assert api.status_code == 200 and api.headers["content-encoding"] == "gzip"
    assert api.json()["openapi"]  # httpx inflated it
    assert api.headers["vary"] == "Accept-Encoding"

    with httpx.stream("GET", f"{proxy.url}/api/v1/runs/{run}/stream", headers={
            "Accept-Encoding": "gzip", "Last-Event-ID": "0"}, timeout=30) as stream:
        assert stream.status_code == 200
        assert stream.headers["content-type"].startswith("text/event-stream")
        assert "content-encoding" not in stream.headers
        first = next(stream.iter_lines())  # sent at once: not held in a proxy buffer
        assert first.startswith((":", "retry:", "id:", "event:"))

    auth = {"Authorization": f"Bearer {token}", "Content-Type": "application/json"}
    for path, size in (("/api/v1/ingest", 9 * 1024 * 1024), ("/api/v1/subscriptions", 2 * 1024 * 1024)):
        r = httpx.post(proxy.url + path, content=b"{" + b" " * size + b"}", headers=auth, timeout=60)
        assert r.status_code == 413, (path, r.status_code)
        assert r.json()["error"]["field"] == "body"
    # Within nginx's limit, the API's own limit (64 KiB off ingest) answers, as without nginx.
    r = httpx.post(f"{proxy.url}/api/v1/subscriptions", content=b"{" + b" " * 100_000 + b"}", headers=auth, timeout=60)
    assert r.status_code == 413 and r.json()["error"]["message"]
