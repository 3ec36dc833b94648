"""Helpers of the importer tests: the real tools and the CLI in their own processes."""

from __future__ import annotations

import subprocess
from pathlib import Path

import services


def runcast_cli(*args: str, timeout: float = 300, **env: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(services.BIN / "runcast"), *args],
        env=services.child_env(env),
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )


def run_python(script: str, cwd: Path, timeout: float = 300, **env: str) -> None:
    """Run ``script`` in a fresh interpreter (the real tools write their files there)."""
    res = subprocess.run(
        [str(services.BIN / "python"), "-c", script],
        cwd=cwd,
        env=services.child_env(env),
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )
    assert res.returncode == 0, f"{res.stdout}\n{res.stderr}"
