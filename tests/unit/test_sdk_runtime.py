"""Environment and code-revision capture; the retired redis:// transport."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
import runcast
from runcast import runtime
from runcast.sender.transport import public_url


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


def test_redis_transport_is_retired_with_a_clear_error(tmp_path, monkeypatch):
    """A batch handed straight to the broker was lost with a Redis restart: the SDK sends over HTTP."""
    monkeypatch.delenv("RANK", raising=False)
    for url in ("redis://127.0.0.1:6379/0", "rediss://:pw@redis:6380/0"):
        with pytest.raises(ValueError, match="redis:// transport was retired.*HTTP address") as err:
            runcast.init("sdk-tests", "x", transport=url, spool_dir=tmp_path, capture_code=False)
        assert "pw" not in str(err.value)
    with pytest.raises(ValueError, match="retired"):
        runcast.init("sdk-tests", "x", server="redis://127.0.0.1:6379/0", spool_dir=tmp_path, capture_code=False)


def test_sync_of_a_spool_recorded_for_redis_says_to_pass_the_http_server(tmp_path):
    """A spool left by an SDK of the previous release that sent to redis://: nothing lost,
    and the message names what to do."""
    from runcast.cli.main import app
    from runcast.sender.spool import Spool
    from typer.testing import CliRunner

    spool = Spool.create(tmp_path, {"run": "run-aaaaaaaa", "segment": "seg-bbbbbbbb", "url": "redis://redis:6379/0"})
    spool.append(b'{"v":1,"events":[]}')
    spool.close()
    result = CliRunner().invoke(app, ["sync", str(tmp_path)])
    assert result.exit_code == 1
    assert "retired" in result.output and "HTTP address" in result.output
    assert (spool.path / "batches.jsonl").stat().st_size > 0  # kept for a sync with --server
