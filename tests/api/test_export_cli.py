"""``runcast export`` against a live server (``runcast serve`` on a free port, embedded SQLite)."""

from __future__ import annotations

import math
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
import services


@pytest.fixture
def server(client, embedded_env: Path, tmp_path: Path) -> Iterator[str]:
    """A ``runcast serve`` process on the same data dir as ``client`` and ``seed``."""
    proc, url = services.start_api(
        {"RUNCAST_DATA_DIR": str(embedded_env)}, tmp_path / "api.log"
    )
    try:
        yield url
    finally:
        proc.stop()


def cli(*args: str, **env: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(services.BIN / "runcast"), "export", *args],
        env=services.child_env(env),
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


def test_export_cli_streams_what_the_api_serves(server, client, seed, auth, tmp_path):
    run = seed.run(name="cli").start(visibility="private")
    run.log({"loss": [(s, 1 / (s + 1)) for s in range(2500)], "gnorm": [(1, math.nan)]})
    token = seed.token()
    expected = client.get(
        f"/api/v1/runs/{run.run}/export", params={"format": "csv"}, headers=auth(token)
    ).text
    assert expected.count("\n") == 2502

    out = tmp_path / "run.csv"
    res = cli(
        run.run, "--server", server, "--token", token, "--format", "csv", "-o", str(out)
    )
    assert res.returncode == 0, res.stderr
    assert out.read_text() == expected
    assert not (tmp_path / "run.csv.part").exists()

    # Standard output, server and token from the environment, one key.
    res = cli(run.run, "--key", "gnorm", RUNCAST_SERVER=server, RUNCAST_TOKEN=token)
    assert res.returncode == 0, res.stderr
    assert res.stdout == '{"segment":0,"key":"gnorm","step":1,"value":"NaN"}\n'

    # Parquet: the same rows, read back with pyarrow.
    import pyarrow.parquet as pq

    out = tmp_path / "run.parquet"
    res = cli(run.run, "--server", server, "--token", token, "--format", "parquet", "-o", str(out))
    assert res.returncode == 0, res.stderr
    table = pq.read_table(out)
    assert table.num_rows == 2501 and table.column("step").to_pylist()[-1] == 2499


def test_export_cli_reports_http_errors(server, seed, tmp_path):
    run = seed.run(name="hidden").start(visibility="private")
    out = tmp_path / "x.jsonl"
    res = cli(run.run, "--server", server, "-o", str(out))
    assert res.returncode == 3  # not found (docs/cli.md)
    assert "404" in res.stderr and "run not found" in res.stderr
    assert not out.exists()

    res = cli(run.run, "--server", server, "--token", "rc_wrong")
    assert res.returncode == 4  # refused
    assert "401" in res.stderr and "invalid or revoked token" in res.stderr


@pytest.mark.parametrize(
    ("args", "flag"),
    [
        (["not an id"], "RUN"),
        (["abcdefgh12", "--server", "ftp://host"], "--server"),
        (["abcdefgh12", "--format", "xml"], "--format"),
        (["abcdefgh12", "--key", ""], "--key"),
    ],
)
def test_export_cli_names_the_bad_flag(args, flag):
    res = cli(*args)
    assert res.returncode == 2
    assert flag in res.stderr


def test_export_cli_unreachable_server():
    res = cli("abcdefgh12", "--server", f"http://127.0.0.1:{services.free_port()}")
    assert res.returncode == 1
    assert "could not export" in res.stderr


def test_export_into_a_closed_pipe_ends_quietly(server, seed):
    """``runcast export RUN | head -1``: the reader goes away, the command stops without a traceback."""
    run = seed.run(name="piped").start()
    run.log({"loss": [(s, 1 / (s + 1)) for s in range(50_000)]})
    shell = subprocess.run(
        f"'{services.BIN / 'runcast'}' export {run.run} --server {server} | head -1; echo \"status ${{PIPESTATUS[0]}}\"",
        shell=True, executable="/bin/bash", env=services.child_env({}), capture_output=True, text=True, timeout=120,
        check=False,
    )
    first, status = shell.stdout.splitlines()
    assert first.startswith('{"segment":0,"key":"loss","step":0')
    assert status == "status 141" and shell.stderr == ""  # 128 + SIGPIPE, as any Unix tool, and not a word
