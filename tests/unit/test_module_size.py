"""No module of the product passes 400 lines (issue 27): the server's and the SDK's Python
modules and the dashboard's JavaScript modules. A bigger one is split by concern."""

from __future__ import annotations

from pathlib import Path

import pytest
from services import ROOT

MAX_LINES = 400
# (folder, file pattern): the product's code, not its tests, benchmarks or built bundles.
MODULES = [
    ("backend/runcast_server", "*.py"),
    ("trainer/runcast", "*.py"),
    ("frontend/js", "*.js"),
]


def oversized(root: Path) -> dict[str, int]:
    """Each module under root's MODULES folders longer than MAX_LINES, with its line count."""
    found = {}
    for folder, pattern in MODULES:
        for path in sorted((root / folder).rglob(pattern)):
            lines = len(path.read_text(encoding="utf-8").splitlines())
            if lines > MAX_LINES:
                found[path.relative_to(root).as_posix()] = lines
    return found


def test_no_module_passes_400_lines() -> None:
    assert all(any((ROOT / folder).rglob(pattern)) for folder, pattern in MODULES)
    assert oversized(ROOT) == {}


@pytest.mark.parametrize(
    ("name", "suffix"),
    [("backend/runcast_server/web/big", ".py"), ("trainer/runcast/big", ".py"), ("frontend/js/run/big", ".js")],
)
def test_an_oversized_module_is_named(tmp_path: Path, name: str, suffix: str) -> None:
    for folder, _ in MODULES:
        (tmp_path / folder).mkdir(parents=True)
    path = tmp_path / (name + suffix)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("x = 1\n" * MAX_LINES, encoding="utf-8")
    assert oversized(tmp_path) == {}
    path.write_text("x = 1\n" * (MAX_LINES + 1), encoding="utf-8")
    assert oversized(tmp_path) == {name + suffix: MAX_LINES + 1}
