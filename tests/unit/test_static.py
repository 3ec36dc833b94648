"""The code is lint- and type-clean: ruff on backend/ and trainer/runcast/ with the rules of
pyproject.toml, mypy on the server and mypy --strict on the SDK (issue 11)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from services import ROOT

BIN = Path(sys.executable).parent
pytestmark = pytest.mark.timeout(900)


def _run(*args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": f"{ROOT / 'trainer'}{os.pathsep}{ROOT / 'backend'}"}
    return subprocess.run(list(args), cwd=ROOT, env=env, capture_output=True, text=True, timeout=900, check=False)


def test_ruff_finds_nothing() -> None:
    res = _run(str(BIN / "ruff"), "check", "--no-cache", "backend", "trainer/runcast")
    assert res.returncode == 0, res.stdout + res.stderr


@pytest.mark.slow
@pytest.mark.parametrize(("target", "flags"), [("backend/runcast_server", ()), ("trainer/runcast", ("--strict",))])
def test_mypy_finds_nothing(target: str, flags: tuple[str, ...], tmp_path: Path) -> None:
    res = _run(sys.executable, "-m", "mypy", "--cache-dir", str(tmp_path / "mypy"), *flags, target)
    assert res.returncode == 0, res.stdout[-6000:] + res.stderr
