"""``runcast import`` as a user runs it, against ``runcast serve``: output, exit statuses, progress, extras."""

from __future__ import annotations

import json
import os
import pty
import subprocess
import sys
from pathlib import Path

import pytest
import services
from runcast.cli.main import app
from torch.utils.tensorboard import SummaryWriter
from typer.testing import CliRunner

from importers.tools import runcast_cli


def write_tb(logdir: Path, n: int = 500) -> None:
    with SummaryWriter(str(logdir)) as w:
        for s in range(n):
            w.add_scalar("train/loss", 1.0 / (1 + s), s, walltime=1_700_000_000 + s)


def test_import_a_logdir_twice(hub, server, tmp_path):
    write_tb(tmp_path / "tb" / "baseline")
    args = ["import", str(tmp_path / "tb"), "--server", server, "--token", hub.token(), "--project", "demo"]

    first = runcast_cli(*args)

    assert first.returncode == 0, first.stderr
    (run_line, summary) = first.stdout.splitlines()
    run_id = run_line.split()[1]
    # what is stored: the 500 losses (their steps' times are the server's own series, not points of the import)
    assert run_line == f"run {run_id}  baseline: 500 points, 1 segment(s)"
    assert summary == "imported 500 points as 1 run(s), 1 segment(s), 0 note(s)"
    exported = hub.export(run_id)
    version = hub.run(run_id)["last_step"], len(hub.events(run_id))

    again = runcast_cli(*args)

    assert again.returncode == 0, again.stderr
    # what this import stored: nothing new
    assert again.stdout.splitlines() == [
        f"run {run_id}  baseline: 0 points, 1 segment(s); 500 point(s) already stored",
        "imported 0 points as 1 run(s), 1 segment(s), 0 note(s); 500 point(s) already stored",
    ]
    assert hub.export(run_id) == exported and (hub.run(run_id)["last_step"], len(hub.events(run_id))) == version
    assert len(exported.splitlines()) == 500
    assert [json.loads(line)["time"] for line in exported.splitlines()] == [1_700_000_000.0 + s for s in range(500)]

    with SummaryWriter(str(tmp_path / "tb" / "baseline")) as w:  # the run goes on: 100 more steps
        for s in range(500, 600):
            w.add_scalar("train/loss", 1.0 / (1 + s), s, walltime=1_700_000_000 + s)
    grown = runcast_cli(*args)
    assert grown.returncode == 0, grown.stderr
    assert grown.stdout.splitlines()[-1] == "imported 100 points as 1 run(s), 1 segment(s), 0 note(s); 500 point(s) already stored"


def test_errors_exit_non_zero_and_send_nothing(hub, server, tmp_path):
    good = tmp_path / "good.jsonl"
    good.write_text("".join(json.dumps({"step": s, "loss": 1.0}) + "\n" for s in range(10)))
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"step": 1, "loss": 1.0}\n{"step": 2, "loss": \n')
    base = ["--server", server, "--token", hub.token(), "--project", "demo"]

    res = runcast_cli("import", str(good), str(bad), *base)
    assert res.returncode == 1
    assert res.stderr == f"error: {bad}:2: not JSON (Expecting value)\n" and res.stdout == ""

    empty = tmp_path / "empty.csv"
    empty.write_text("step,loss\n")
    res = runcast_cli("import", str(empty), *base)
    assert (res.returncode, res.stderr) == (1, f"error: {empty}: no metric points to import\n")

    damaged = tmp_path / "mlflow.db"
    damaged.write_bytes(b"SQLite format 3\x00" + b"\x00" * 100)
    res = runcast_cli("import", str(good), str(damaged), *base)
    assert res.returncode == 1 and res.stderr.startswith(f"error: {damaged}: MLflow cannot read this store (DatabaseError")

    res = runcast_cli("import", str(tmp_path / "missing.jsonl"), *base)
    assert (res.returncode, res.stderr) == (1, f"error: {tmp_path / 'missing.jsonl'}: no such file or directory\n")

    res = runcast_cli("import", str(good), "--format", "wandb-csv", *base)
    assert res.returncode == 1 and "a W&B chart export has a 'Step' column" in res.stderr

    res = runcast_cli("import", str(good), "--server", server, "--token", "rc_wrong", "--project", "demo")
    assert res.returncode == 4 and "refused a batch: HTTP 401" in res.stderr  # refused (docs/cli.md)

    res = runcast_cli("import", str(good), "--token", hub.token())
    assert res.returncode == 2 and "needs a server" in res.stderr
    assert hub.runs() == []


def test_progress_bars_on_a_terminal(hub, server, tmp_path):
    write_tb(tmp_path / "tb" / "run", n=3000)
    leader, follower = pty.openpty()
    proc = subprocess.Popen(
        [str(services.BIN / "runcast"), "import", str(tmp_path / "tb"), "--server", server, "--token", hub.token(),
         "--project", "demo"],
        stdin=follower, stdout=subprocess.PIPE, stderr=follower, env=services.child_env({"COLUMNS": "120"}),
    )
    os.close(follower)
    screen = b""
    while True:
        try:
            chunk = os.read(leader, 65536)
        except OSError:
            break
        if not chunk:
            break
        screen += chunk
    out, _ = proc.communicate(timeout=300)
    os.close(leader)
    assert proc.returncode == 0
    text = screen.decode(errors="replace")
    assert "reading" in text and "sending" in text and "3000/3000" in text and "6000" not in text
    assert out.decode().endswith("imported 3000 points as 1 run(s), 1 segment(s), 0 note(s)\n")


@pytest.mark.parametrize(
    ("module", "source", "extra"),
    [("tensorboard", "tb", "tensorboard"), ("mlflow", "mlruns", "mlflow"), ("wandb", "w/run-x.wandb", "wandb")],
)
def test_a_missing_reader_names_the_extra(tmp_path, monkeypatch, module, source, extra):
    path = tmp_path / source
    if module == "tensorboard":
        write_tb(path, n=3)
    elif module == "mlflow":
        (path / "0").mkdir(parents=True)
        (path / "0" / "meta.yaml").write_text("name: Default\n")
    else:
        path.parent.mkdir()
        path.write_bytes(b"\x00")
    for name in list(sys.modules):
        if name == module or name.startswith(module + "."):
            monkeypatch.delitem(sys.modules, name)
    monkeypatch.setitem(sys.modules, module, None)  # import fails as if not installed

    res = CliRunner().invoke(app, ["import", str(path), "--server", "http://127.0.0.1:9", "--project", "demo"])

    assert res.exit_code == 1
    assert f"pip install 'runcast[{extra}]'" in res.output


def test_every_command_that_makes_runs_defaults_to_the_tokens_project(hub, server, tmp_path, monkeypatch):
    """import, replay and train without --project: the token's project (docs/import.md, docs/cli.md);
    RUNCAST_PROJECT when set; a refused token is one line and exit 4, never a traceback."""
    monkeypatch.delenv("RUNCAST_PROJECT", raising=False)
    log = tmp_path / "train.jsonl"
    log.write_text("".join(json.dumps({"step": s, "loss": 1.0 / (s + 1)}) + "\n" for s in range(10)))
    token = hub.token("mine")
    base = ["--server", server, "--token", token]

    imported = runcast_cli("import", str(log), *base)
    assert imported.returncode == 0, imported.stderr
    run_id = imported.stdout.split()[1]
    assert hub.run(run_id)["project"] == "mine"

    replayed = runcast_cli("replay", str(log), "--speed", "0", "--name", "replayed", "-q", *base)
    assert replayed.returncode == 0, replayed.stderr
    runs = hub.client.get("/api/v1/runs", params={"project": "mine"}).json()["runs"]
    assert {r["name"] for r in runs} >= {"replayed"}

    named = runcast_cli("import", str(log), *base, RUNCAST_PROJECT="other")
    assert named.returncode == 4 and named.stderr.count("\n") == 1 and "Traceback" not in named.stderr

    for verb in (["import", str(log)], ["replay", str(log), "--speed", "0", "-q"]):
        refused = runcast_cli(*verb, "--server", server, "--token", "rc_wrong")
        assert refused.returncode == 4, (verb, refused.stderr)
        assert refused.stderr.count("\n") == 1 and "refused the token" in refused.stderr, refused.stderr


def test_the_counts_printed_are_the_points_stored(hub, server, tmp_path):
    """A training log with times: its points are stored, each step with its time (the server's own
    series, not a point the import counts), and the command says how many points."""
    log = tmp_path / "timed.jsonl"
    log.write_text("".join(json.dumps({"step": s, "loss": 1.0 / (s + 1), "timestamp": 1_700_000_000 + s}) + "\n"
                           for s in range(7)))
    res = runcast_cli("import", str(log), "--server", server, "--token", hub.token(), "-q")
    assert res.returncode == 0, res.stderr
    run_line, summary = res.stdout.splitlines()
    run_id = run_line.split()[1]
    rows = hub.export(run_id).splitlines()
    stored = len(rows)
    assert stored == 7 and f": {stored} points," in run_line and summary.startswith(f"imported {stored} points")
    assert [json.loads(r)["time"] for r in rows] == [1_700_000_000.0 + s for s in range(7)]
