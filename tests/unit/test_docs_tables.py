"""The docs' tables of limits are written from the code that enforces them (scripts/docs-tables):
the suite fails when a limit changes and the docs were not regenerated."""

from __future__ import annotations

import importlib.machinery
import importlib.util
from pathlib import Path
from types import ModuleType

import pytest

SCRIPT = Path(__file__).resolve().parents[2] / "scripts" / "docs-tables"


def _tables() -> ModuleType:
    loader = importlib.machinery.SourceFileLoader("docs_tables", str(SCRIPT))
    spec = importlib.util.spec_from_loader("docs_tables", loader)
    assert spec is not None
    module = importlib.util.module_from_spec(spec)
    loader.exec_module(module)
    return module


def test_the_docs_tables_match_the_code() -> None:
    assert _tables().main(["--check"]) == 0, "run scripts/docs-tables"


def test_a_changed_limit_makes_the_check_fail(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    from runcast.wire import limits

    monkeypatch.setattr(limits, "MAX_TAGS", limits.MAX_TAGS + 1)
    assert _tables().main(["--check"]) == 1
    assert "docs/ingest.md" in capsys.readouterr().err
