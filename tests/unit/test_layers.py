"""The import contracts of pyproject.toml ([tool.importlinter]) hold, and they bite.

`lint-imports` reads the contracts from the checkout's pyproject.toml and the packages
from this checkout (PYTHONPATH), whatever the venv's editable install points at.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

from services import ROOT

LINT_IMPORTS = Path(sys.executable).parent / "lint-imports"


def lint_imports(root: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": f"{root / 'trainer'}{os.pathsep}{root / 'backend'}"}
    return subprocess.run(
        [str(LINT_IMPORTS), "--no-cache", "--config", str(root / "pyproject.toml")],
        cwd=root, env=env, capture_output=True, text=True, timeout=300, check=False,
    )  # fmt: skip


def test_every_import_contract_is_kept() -> None:
    res = lint_imports(ROOT)
    assert res.returncode == 0, res.stdout + res.stderr
    assert "0 broken" in res.stdout


def test_an_sdk_module_importing_the_server_breaks_the_contract(tmp_path: Path) -> None:
    """The same contracts over a copy of the tree where one SDK module imports the server."""
    ignore = shutil.ignore_patterns("__pycache__")
    shutil.copy(ROOT / "pyproject.toml", tmp_path / "pyproject.toml")
    shutil.copytree(ROOT / "trainer" / "runcast", tmp_path / "trainer" / "runcast", ignore=ignore)
    shutil.copytree(ROOT / "backend" / "runcast_server", tmp_path / "backend" / "runcast_server", ignore=ignore)
    (tmp_path / "trainer" / "runcast" / "offender.py").write_text("from runcast_server.core import db\n")

    res = lint_imports(tmp_path)
    assert res.returncode == 1, res.stdout + res.stderr
    assert "The SDK never imports the server BROKEN" in res.stdout
    assert "runcast.offender -> runcast_server.core.db" in res.stdout


def test_a_domain_importing_one_above_it_or_a_sibling_breaks_the_domain_contract(tmp_path: Path) -> None:
    """The domains' layers contract over a copy of the tree where a lower domain imports a higher
    one (reads -> policy), one imports the HTTP layer (runs -> api) and one imports an
    independent sibling (live -> artifacts)."""
    ignore = shutil.ignore_patterns("__pycache__")
    shutil.copy(ROOT / "pyproject.toml", tmp_path / "pyproject.toml")
    shutil.copytree(ROOT / "trainer" / "runcast", tmp_path / "trainer" / "runcast", ignore=ignore)
    shutil.copytree(ROOT / "backend" / "runcast_server", tmp_path / "backend" / "runcast_server", ignore=ignore)
    server = tmp_path / "backend" / "runcast_server"
    (server / "reads" / "offender.py").write_text("from runcast_server.policy import apply\n")
    (server / "runs" / "offender.py").write_text("from runcast_server.api import deps\n")
    (server / "live" / "offender.py").write_text("from runcast_server.artifacts import storage\n")

    res = lint_imports(tmp_path)
    assert res.returncode == 1, res.stdout + res.stderr
    assert "Server domains: each imports only the domains below it BROKEN" in res.stdout
    for line in ("runcast_server.reads.offender -> runcast_server.policy.apply",
                 "runcast_server.runs.offender -> runcast_server.api.deps",
                 "runcast_server.live.offender -> runcast_server.artifacts.storage"):
        assert line in res.stdout, res.stdout
