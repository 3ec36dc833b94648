"""The README's "Log a run" example, word for word, with the server down when it starts: the
training script is never broken by it (exit 0, its URL printed), the run is spooled under no
project, and once the server is up the command the script printed stores every point in the
token's project."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest
from services import BIN, child_env, free_port

from integration.helpers import export_rows, get_run
from integration.test_embedded import make_token

pytestmark = pytest.mark.slow

README = Path(__file__).resolve().parents[2] / "README.md"


def _quick_start() -> str:
    """The Python block of the README's "Log a run" section, as a user copies it."""
    return re.search(r"^## Log a run\n.*?```python\n(.*?)```", README.read_text(), re.S | re.M)[1]


def test_the_readme_quick_start_with_the_server_down_then_up(processes):
    data_dir = processes.tmp / "data"
    processes.env = {"RUNCAST_DATA_DIR": str(data_dir)}
    token = make_token(processes.env, "team", data_dir)  # the token exists before the server runs
    port = free_port()
    env = child_env({"RUNCAST_SERVER": f"http://127.0.0.1:{port}", "RUNCAST_TOKEN": token,
                     "RUNCAST_SPOOL_DIR": str(processes.tmp / "spool"), "HOME": str(processes.tmp)})
    script = processes.tmp / "train.py"
    script.write_text(_quick_start())
    trained = subprocess.run([sys.executable, str(script)], env=env, capture_output=True, text=True, timeout=120,
                             check=False)
    assert trained.returncode == 0, trained.stderr  # the server being away never breaks the training
    run_id = trained.stdout.strip().rsplit("/", 1)[-1]
    command = re.search(r"Send them with: (runcast sync \S+)$", trained.stderr, re.M)
    assert command, trained.stderr
    assert "Traceback" not in trained.stderr

    processes.start_api(port=port)
    synced = subprocess.run([str(BIN / "runcast"), *command[1].split()[1:]], env=env, capture_output=True,
                            text=True, timeout=300, check=False)
    assert synced.returncode == 0, synced.stdout + synced.stderr
    assert "the token's project" in synced.stdout
    url = processes.api_url
    run = get_run(url, run_id, token).json()
    assert run["project"] == "team" and run["name"] == "baseline" and run["tags"] == ["readme"]
    assert run["status"] == "finished" and run["config"] == {"lr": 3e-4}
    rows = export_rows(url, run_id, token)
    assert sorted((r["key"], r["step"]) for r in rows) == sorted(
        (key, step) for key in ("lr", "train/loss") for step in range(1, 1001))
