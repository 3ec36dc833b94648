"""``runcast export`` against a live server (``runcast serve`` on a free port, embedded SQLite)."""

from __future__ import annotations

import json
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
    assert json.loads(res.stdout)["value"] == "NaN" and res.stdout.count("\n") == 1
    assert res.stdout.startswith('{"segment":0,"key":"gnorm","step":1,"value":"NaN","time":')

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


def test_export_media_writes_the_images_and_a_manifest_equal_to_the_api(server, client, seed, tmp_path):
    """``runcast export RUN --what media -o DIR``: every media row in manifest.jsonl as the API lists
    it, each distinct image once under images/, its bytes the image the server named."""
    import hashlib
    import json

    import numpy as np
    import runcast

    token = seed.token()
    run = runcast.init(project="demo", name="media", server=server, token=token, capture_code=False,
                       system_metrics=False, spool_dir=str(tmp_path / "spool"))
    gradient = np.linspace(0, 1, 32 * 48, dtype=np.float32).reshape(32, 48)
    for step in (1, 2, 3):
        run.log({"loss": 1.0 / step, "gen/grid": runcast.Image(gradient * step / 3, caption=f"step {step}"),
                 "weights": runcast.Histogram(np.arange(100, dtype=np.float32) * step, bins=8)}, step=step)
    run.log({"same": runcast.Image(gradient)}, step=4)  # the bytes of step 3's image: one file for both
    run.log_media("val/worst", runcast.Table(columns=["prompt", "loss"], rows=[["a", 3.1], ["<b>", None]]), step=4)
    run.finish(timeout=60)
    listed = client.get(f"/api/v1/runs/{run.id}/media", params={"limit": 1000}).json()["media"]
    assert len(listed) == 8

    out = tmp_path / "media"
    res = cli(run.id, "--server", server, "--what", "media", "-o", str(out), "-q")
    assert res.returncode == 0, res.stderr
    rows = [json.loads(line) for line in (out / "manifest.jsonl").read_text().splitlines()]
    assert [{k: v for k, v in row.items() if k != "file"} for row in rows] == listed
    images = [row for row in rows if row["kind"] == "image"]
    assert len(images) == 4 and len({row["file"] for row in images}) == 3
    for row in images:
        data = (out / row["file"]).read_bytes()
        assert hashlib.sha256(data).hexdigest() == row["blob"] and len(data) == row["size"]
    assert sorted(p.name for p in (out / "images").iterdir()) == sorted({row["file"][7:] for row in images})

    assert cli(run.id, "--server", server, "--what", "media").returncode == 2  # files need a directory
    again = cli(run.id, "--server", server, "--what", "media", "-o", str(out / "manifest.jsonl"))
    assert again.returncode == 2 and "--output" in again.stderr
