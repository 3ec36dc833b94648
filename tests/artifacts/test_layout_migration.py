"""`runcast storage migrate`: checkpoints recorded before the per-project layout are moved into
their project's directory and listed as before; a file two projects name is left alone."""

from __future__ import annotations

import hashlib

from typer.testing import CliRunner

from artifacts.conftest import checkpoint_event, write_file


def _statuses(client, run):
    return {c["step"]: c["status"] for c in client.get(f"/api/v1/runs/{run}/checkpoints").json()["checkpoints"]}


def test_migrate_moves_old_layout_into_project_directories(client, seed, storage_root):
    from runcast.cli.main import app

    sha_rel = write_file(storage_root / "run1" / "a.pt", 100, 1)
    sha_abs = write_file(storage_root / "run2" / "b.pt", 200, 2)
    write_file(storage_root / "shared.pt", 10, 3)
    ok = write_file(storage_root / "demo" / "in-place.pt", 50, 4)
    demo = seed.run("demo").start()
    demo.send([
        checkpoint_event(demo, "run1/a.pt", 1, 100, sha_rel),
        checkpoint_event(demo, str(storage_root / "run2" / "b.pt"), 2, 200, sha_abs),
        checkpoint_event(demo, "run1/gone.pt", 3, 5, None),
        checkpoint_event(demo, "run1/gone.pt", 3, 0, None, status="pruned"),
        checkpoint_event(demo, "shared.pt", 4, 10, None),
        checkpoint_event(demo, "demo/in-place.pt", 5, 50, ok),
    ])
    other = seed.run("other").start()
    other.send([checkpoint_event(other, "shared.pt", 1, 10, None)])
    assert _statuses(client, demo.run) == {1: "missing", 2: "missing", 3: "pruned", 4: "missing", 5: "available"}

    runner = CliRunner()
    plan = runner.invoke(app, ["storage", "migrate"])
    assert plan.exit_code == 0, plan.output
    assert "move run1/a.pt -> demo/run1/a.pt (1 checkpoint events)" in plan.output
    assert "move run2/b.pt -> demo/run2/b.pt" in plan.output
    assert "left alone: shared.pt is named by checkpoints of several projects: demo, other" in plan.output
    assert "run again with --apply" in plan.output
    assert (storage_root / "run1" / "a.pt").exists()  # the plan changes nothing

    done = runner.invoke(app, ["storage", "migrate", "--apply"])
    assert done.exit_code == 0, done.output
    assert _statuses(client, demo.run) == {1: "available", 2: "available", 3: "pruned", 4: "missing", 5: "available"}
    assert hashlib.sha256((storage_root / "demo" / "run1" / "a.pt").read_bytes()).hexdigest() == sha_rel
    assert not (storage_root / "run1" / "a.pt").exists() and (storage_root / "shared.pt").exists()
    listed = client.get(f"/api/v1/runs/{demo.run}/checkpoints").json()["checkpoints"]
    res = client.get(next(c["download_url"] for c in listed if c["step"] == 2))
    assert hashlib.sha256(res.content).hexdigest() == sha_abs

    again = runner.invoke(app, ["storage", "migrate", "--apply"])
    assert again.exit_code == 0 and "nothing to move" in again.output
