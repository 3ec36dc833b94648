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
SERVER_LAYERS = "Server layers: every package in one order, the CLI at the top and core at the bottom"


def lint_imports(root: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": f"{root / 'trainer'}{os.pathsep}{root / 'backend'}"}
    return subprocess.run(
        [str(LINT_IMPORTS), "--no-cache", "--config", str(root / "pyproject.toml")],
        cwd=root, env=env, capture_output=True, text=True, timeout=300, check=False,
    )  # fmt: skip


def copy_tree(tmp_path: Path) -> Path:
    """The contracts and both packages, copied to ``tmp_path`` (where ``lint_imports`` reads them)."""
    ignore = shutil.ignore_patterns("__pycache__")
    shutil.copy(ROOT / "pyproject.toml", tmp_path / "pyproject.toml")
    shutil.copytree(ROOT / "trainer" / "runcast", tmp_path / "trainer" / "runcast", ignore=ignore)
    shutil.copytree(ROOT / "backend" / "runcast_server", tmp_path / "backend" / "runcast_server", ignore=ignore)
    return tmp_path


def _copy(tmp_path: Path) -> Path:
    """The tree copied; returns the server package's copy."""
    return copy_tree(tmp_path) / "backend" / "runcast_server"


def test_every_import_contract_is_kept() -> None:
    res = lint_imports(ROOT)
    assert res.returncode == 0, res.stdout + res.stderr
    assert "0 broken" in res.stdout


def test_an_sdk_module_importing_the_server_breaks_the_contract(tmp_path: Path) -> None:
    """The same contracts over a copy of the tree where one SDK module imports the server."""
    (copy_tree(tmp_path) / "trainer" / "runcast" / "offender.py").write_text("from runcast_server.core import db\n")

    res = lint_imports(tmp_path)
    assert res.returncode == 1, res.stdout + res.stderr
    assert "The SDK never imports the server BROKEN" in res.stdout
    assert "runcast.offender -> runcast_server.core.db" in res.stdout


def test_a_domain_importing_one_above_it_or_a_sibling_breaks_the_domain_contract(tmp_path: Path) -> None:
    """The domains' layers contract over a copy of the tree where a lower domain imports a higher
    one (reads -> policy), one imports the HTTP layer (runs -> api) and one imports an
    independent sibling (live -> artifacts)."""
    server = _copy(tmp_path)
    (server / "reads" / "offender.py").write_text("from runcast_server.policy import apply\n")
    (server / "runs" / "offender.py").write_text("from runcast_server.api import deps\n")
    (server / "live" / "offender.py").write_text("from runcast_server.artifacts import storage\n")

    res = lint_imports(tmp_path)
    assert res.returncode == 1, res.stdout + res.stderr
    assert f"{SERVER_LAYERS} BROKEN" in " ".join(res.stdout.split())
    for line in ("runcast_server.reads.offender -> runcast_server.policy.apply",
                 "runcast_server.runs.offender -> runcast_server.api.deps",
                 "runcast_server.live.offender -> runcast_server.artifacts.storage"):
        assert line in res.stdout, res.stdout


def test_the_detectors_importing_the_metrics_and_core_importing_the_routes_break_the_contracts(tmp_path: Path) -> None:
    """Imports downward that no layer order can refuse (detectors -> observability: the detectors are
    pure) and upward from the bottom (core -> api), planted in a copy of the tree."""
    server = _copy(tmp_path)
    (server / "detectors" / "offender.py").write_text("from runcast_server.observability import logs\n")
    (server / "core" / "offender.py").write_text("from runcast_server.api import deps\n")
    (server / "observability" / "offender.py").write_text("from runcast_server.inbox import models\n")

    res = lint_imports(tmp_path)
    out = " ".join(res.stdout.split())
    assert res.returncode == 1, res.stdout + res.stderr
    assert "The detectors are pure: no database, web, broker, metrics or server module BROKEN" in out
    assert f"{SERVER_LAYERS} BROKEN" in out
    for line in ("runcast_server.detectors.offender -> runcast_server.observability.logs",
                 "runcast_server.core.offender -> runcast_server.api.deps",
                 "runcast_server.observability.offender -> runcast_server.inbox.models"):
        assert line in res.stdout, res.stdout


def test_a_package_in_no_contract_breaks_the_server_layers(tmp_path: Path) -> None:
    """Every package and top-level module of the server has its place in the layers (``exhaustive``):
    a new one, however innocent, is refused until it is given one."""
    server = _copy(tmp_path)
    (server / "newcomer").mkdir()
    (server / "newcomer" / "__init__.py").write_text('"""Imports nothing."""\n')
    (server / "loose.py").write_text('"""Imports nothing."""\n')

    res = lint_imports(tmp_path)
    assert res.returncode == 1, res.stdout + res.stderr
    assert f"{SERVER_LAYERS} BROKEN" in " ".join(res.stdout.split())
    assert "- runcast_server.newcomer" in res.stdout and "- runcast_server.loose" in res.stdout, res.stdout


def test_every_server_package_has_one_place_in_the_layers() -> None:
    """The layers contract names each package of the server once (none left out, none twice)."""
    import tomllib

    contracts = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["importlinter"]["contracts"]
    layered = [c for c in contracts if c["type"] == "layers" and c.get("containers") == ["runcast_server"]]
    assert len(layered) == 1 and layered[0].get("exhaustive") is True
    names = [n.strip() for layer in layered[0]["layers"] for n in layer.replace(":", "|").split("|")]
    server = ROOT / "backend" / "runcast_server"
    children = sorted(p.stem if p.is_file() else p.name for p in server.iterdir()
                      if (p.suffix == ".py" and p.stem != "__init__") or (p / "__init__.py").exists())
    assert sorted(names) == children


def import_cycles(package: str) -> list[list[str]]:
    """The groups of modules of ``package`` that import each other round (strongly connected, more than
    one module), from grimp's graph (every import counts: in functions, under TYPE_CHECKING)."""
    import grimp

    graph = grimp.build_graph(package, cache_dir=None)
    edges = {m: sorted(m2 for m2 in graph.find_modules_directly_imported_by(m) if m2.startswith(package))
             for m in graph.modules}
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    groups: list[list[str]] = []
    for root in sorted(edges):  # Tarjan's algorithm, iterative (no recursion limit)
        if root in index:
            continue
        work = [(root, iter(edges[root]))]
        index[root] = low[root] = len(index)
        stack.append(root)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = len(index)
                    stack.append(child)
                    work.append((child, iter(edges[child])))
                elif child in stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                group = []
                while True:
                    member = stack.pop()
                    group.append(member)
                    if member == node:
                        break
                if len(group) > 1:
                    groups.append(sorted(group))
    return groups


def test_no_import_cycle_between_the_servers_modules() -> None:
    """grimp: no two modules of the server import each other, directly or round a loop (on main before
    issue 27: three groups, 8 modules: artifacts.s3/storage, alerts.notify/runner/stall with context,
    metrics.export/export_parquet)."""
    assert import_cycles("runcast_server") == []


def test_the_cycle_finder_finds_a_planted_cycle(tmp_path: Path) -> None:
    pkg = tmp_path / "loopy"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "a.py").write_text("from loopy import b\n")
    (pkg / "b.py").write_text("def f():\n    from loopy import c\n")
    (pkg / "c.py").write_text("from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from loopy import a\n")
    (pkg / "d.py").write_text("from loopy import a\n")
    sys.path.insert(0, str(tmp_path))
    try:
        assert import_cycles("loopy") == [["loopy.a", "loopy.b", "loopy.c"]]
    finally:
        sys.path.remove(str(tmp_path))


# What the server may import of the SDK: the wire protocol, the two computations both sides make, and
# the version. Everything else of the SDK (its sender, its run, its applications) is the trainer's.
SDK_SHARED = ("runcast.wire", "runcast.estimate", "runcast.image_codec")


def test_the_server_imports_the_sdk_only_through_what_it_shares() -> None:
    """Every direct import of an SDK module by a server module (grimp: in functions and under
    TYPE_CHECKING too) is of ``runcast.wire`` (the wire protocol both sides check), ``runcast.estimate``,
    ``runcast.image_codec``, or ``runcast`` itself for ``__version__``: a new SDK module is outside by
    default, so the server cannot grow a dependency on the trainer's side unseen."""
    import grimp

    graph = grimp.build_graph("runcast_server", "runcast", cache_dir=None)
    imports = {(m, t) for m in graph.modules if m.startswith("runcast_server")
               for t in graph.find_modules_directly_imported_by(m) if t == "runcast" or t.startswith("runcast.")}
    assert imports, "no import of the SDK found: the graph is wrong"
    outside = sorted((m, t) for m, t in imports
                     if t != "runcast" and not any(t == s or t.startswith(s + ".") for s in SDK_SHARED))
    assert outside == []

