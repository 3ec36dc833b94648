"""Environment and code-revision capture, and the redis:// (Celery) transport against a real Redis."""

from __future__ import annotations

import base64
import json
import shutil
import subprocess
import sys
import time

import pytest
import runcast
from runcast import runtime
from runcast.transport import public_url
from sdk_receiver import free_port


def _git(repo, *args):
    subprocess.run(["git", "-c", "user.name=t", "-c", "user.email=t@example.org", *args], cwd=repo, check=True,
                   capture_output=True)


def test_code_revision_of_a_dirty_repo(tmp_path):
    _git(tmp_path, "init", "-q", "-b", "main")
    (tmp_path / "train.py").write_text("lr = 1\n")
    _git(tmp_path, "add", "train.py")
    _git(tmp_path, "commit", "-q", "-m", "first")
    _git(tmp_path, "remote", "add", "origin", "https://bot:s3cret@github.com/acme/model.git")
    clean = runtime.code_revision(str(tmp_path))
    assert len(clean["sha"]) == 40 and clean["branch"] == "main"
    assert clean["dirty"] is False and clean["diff"] == "" and clean["diff_truncated"] is False
    assert clean["remote"] == "https://github.com/acme/model.git"

    (tmp_path / "train.py").write_text("lr = 2\n" + "# padding\n" * 30_000)
    dirty = runtime.code_revision(str(tmp_path))
    assert dirty["dirty"] is True and "+lr = 2" in dirty["diff"]
    assert dirty["diff_truncated"] is True
    assert len(dirty["diff"].encode()) <= runtime.MAX_DIFF_BYTES


def test_code_revision_outside_a_repo_is_empty(tmp_path):
    assert runtime.code_revision(str(tmp_path)) == {}


def test_environment_names_versions_without_importing(monkeypatch):
    monkeypatch.setenv("WORLD_SIZE", "8")
    env = runtime.environment(rank=0)
    assert env["world_size"] == 8 and env["rank"] == 0
    assert env["python"] == ".".join(map(str, sys.version_info[:3]))
    assert env["torch"].startswith("2.")
    json.dumps(env, allow_nan=False)


def test_public_url_strips_credentials():
    assert public_url("redis://:pw@redis:6379/0") == "redis://redis:6379/0"
    assert public_url("https://u:p@host/x?q=1") == "https://host/x?q=1"
    assert public_url("http://host:8000") == "http://host:8000"


def _start_redis(tmp_path, port: int):
    binary = shutil.which("redis-server")
    if binary is None:
        pytest.skip("redis-server is not installed")
    proc = subprocess.Popen(
        [binary, "--bind", "127.0.0.1", "--port", str(port), "--save", "", "--appendonly", "no",
         "--dir", str(tmp_path)],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )
    import redis

    client = redis.Redis(port=port)
    deadline = time.monotonic() + 10
    while True:
        try:
            client.ping()
            return proc, client
        except redis.ConnectionError:
            if time.monotonic() > deadline:
                proc.kill()
                raise
            time.sleep(0.05)


@pytest.fixture
def redis_url(tmp_path):
    port = free_port()
    proc, client = _start_redis(tmp_path, port)
    yield f"redis://127.0.0.1:{port}/0", client
    proc.terminate()
    proc.wait(10)


def _task_messages(client) -> list[dict]:
    out = []
    for raw in reversed(client.lrange("celery", 0, -1)):  # LPUSH: newest first
        message = json.loads(raw)
        args, kwargs, _embed = json.loads(base64.b64decode(message["body"]))
        out.append({"task": message["headers"]["task"], "kwargs": kwargs})
    return out


def test_redis_transport_sends_the_celery_task(redis_url, tmp_path, monkeypatch):
    url, client = redis_url
    monkeypatch.delenv("RANK", raising=False)
    run = runcast.init("sdk-tests", "redis", transport=url, token="tok-r", spool_dir=tmp_path,
                       capture_code=False, flush_interval=0.05)
    assert run.url is None
    run.log({"loss": float("nan")}, step=0)
    run.finish()
    messages = _task_messages(client)
    assert {m["task"] for m in messages} == {"runcast.ingest_batch"}
    kwargs = messages[0]["kwargs"]
    assert kwargs["project_id"] is None and kwargs["token"] == "tok-r"
    events_ = [e for m in messages for e in m["kwargs"]["events"]]
    assert [e["type"] for e in events_] == ["run_started", "metrics", "finished"]
    assert events_[1]["values"] == {"loss": "NaN"}


def test_redis_outage_spools_and_replays(redis_url, tmp_path, monkeypatch):
    url, client = redis_url
    down = f"redis://127.0.0.1:{free_port()}/0"
    monkeypatch.delenv("RANK", raising=False)
    run = runcast.init("sdk-tests", "redis-down", transport=down, token="t", spool_dir=tmp_path,
                       capture_code=False, flush_interval=0.05, finish_timeout=0.5)
    run.log({"a": 1.0}, step=0)
    run.finish()
    assert run.stats.spooled == 3 and run.stats.sent == 0
    from runcast.cli.main import app
    from typer.testing import CliRunner

    result = CliRunner().invoke(app, ["sync", str(tmp_path), "--server", url, "--token", "t"])
    assert result.exit_code == 0, result.output
    assert [e["type"] for m in _task_messages(client) for e in m["kwargs"]["events"]] == [
        "run_started", "metrics", "finished",
    ]


def test_redis_comes_back_during_the_run(tmp_path, monkeypatch):
    port = free_port()
    monkeypatch.delenv("RANK", raising=False)
    run = runcast.init("sdk-tests", "redis-back", transport=f"redis://127.0.0.1:{port}/0", token="t",
                       spool_dir=tmp_path / "spool", capture_code=False, flush_interval=0.05,
                       retry_initial=0.05, retry_max=0.2)
    run.log({"a": 1.0}, step=0)
    assert run.flush() is False and run.stats.spooled == 2
    proc, client = _start_redis(tmp_path, port)
    try:
        deadline = time.monotonic() + 10
        while run.stats.replayed < 2 and time.monotonic() < deadline:
            time.sleep(0.02)
        run.log({"a": 2.0}, step=1)
        run.finish()
        steps = [e.get("step") for m in _task_messages(client) for e in m["kwargs"]["events"]]
        assert steps == [None, 0, 1, 1]  # run_started, two metrics, finished (at the last step)
        assert run.stats.replayed == 2 and run.stats.sent == 4
    finally:
        proc.terminate()
        proc.wait(10)


def test_missing_celery_says_what_to_install(monkeypatch, tmp_path):
    monkeypatch.setitem(sys.modules, "celery", None)
    with pytest.raises(ImportError, match="pip install 'celery\\[redis\\]'"):
        runcast.init("sdk-tests", "x", transport="redis://127.0.0.1:1/0", spool_dir=tmp_path, capture_code=False)
