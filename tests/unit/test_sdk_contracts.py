"""The SDK's import contracts are drawn by package: a module added anywhere in the SDK's core
(beside ``runcast.run_handle``, or inside ``runcast.sender`` / ``runcast.wire``) is checked
without being named in pyproject.toml."""

from __future__ import annotations

from pathlib import Path

from test_layers import copy_tree, lint_imports


def _copy(tmp_path: Path) -> Path:
    """The tree copied; returns the SDK package's copy."""
    return copy_tree(tmp_path) / "trainer" / "runcast"


def test_a_new_core_module_importing_an_application_or_its_libraries_breaks_the_contracts(tmp_path: Path) -> None:
    sdk = _copy(tmp_path)
    (sdk / "brand_new.py").write_text("from runcast.cli import app\n")
    (sdk / "sender" / "brand_new.py").write_text("import torch\n")
    (sdk / "wire" / "brand_new.py").write_text("import rich\n")

    res = lint_imports(tmp_path)
    out = res.stdout
    assert res.returncode == 1, out + res.stderr
    assert "runcast.brand_new -> runcast.cli.app" in out
    assert "runcast.sender.brand_new -> torch" in out
    assert "runcast.wire.brand_new -> rich" in out


def test_the_applications_may_use_what_they_need(tmp_path: Path) -> None:
    """The same tree with a new module in each application importing its libraries: kept."""
    sdk = _copy(tmp_path)
    (sdk / "cli" / "brand_new.py").write_text("import rich\nimport typer\nfrom runcast.train import config\n")
    (sdk / "train" / "brand_new.py").write_text("import numpy\nimport torch\nfrom runcast.sender import spool\n")

    res = lint_imports(tmp_path)
    assert res.returncode == 0, res.stdout + res.stderr
