"""scripts/system-packages (run by scripts/test): which Debian packages a machine lacks, checked
with `--check` (installs nothing) on PATHs that hide the tools; quiet when nothing is missing."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

from services import ROOT

SCRIPT = ROOT / "scripts" / "system-packages"


def check(path: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["/bin/bash", str(SCRIPT), "--check"], env={"PATH": path}, capture_output=True,
                          text=True, timeout=60, check=False)  # fmt: skip


def test_a_path_without_the_tools_lists_their_packages(tmp_path: Path) -> None:
    res = check(str(tmp_path))  # an empty PATH: only what is found by file path remains
    assert res.returncode == 0 and res.stderr == ""
    listed = res.stdout.splitlines()
    assert {"redis-server", "chromium-driver", "git", "curl", "jq", "npm", "python3.11", "python3.11-venv"} <= set(listed)
    assert set(listed) <= {"postgresql", "chromium", "nginx", "redis-server", "chromium-driver", "git", "curl", "jq",
                           "npm", "python3.11", "python3.11-venv", "fonts-wqy-microhei"}  # fmt: skip


def test_one_tool_missing_lists_only_its_package(tmp_path: Path) -> None:
    for tool in ("redis-server", "chromedriver", "git", "curl", "jq", "npm"):
        found = shutil.which(tool)
        assert found, f"this machine lacks {tool}: scripts/system-packages installs it"
        os.symlink(found, tmp_path / tool)
    os.symlink(os.path.realpath(sys.executable), tmp_path / "python3.11")  # not a shim that needs bash
    os.unlink(tmp_path / "redis-server")
    assert check(str(tmp_path)).stdout == "redis-server\n"


def test_nothing_missing_says_nothing() -> None:
    res = check(os.environ["PATH"])
    assert (res.returncode, res.stdout, res.stderr) == (0, "", "")
    res = subprocess.run([str(SCRIPT)], capture_output=True, text=True, timeout=60, check=False)
    assert (res.returncode, res.stdout, res.stderr) == (0, "", "")  # installs nothing, prints nothing

