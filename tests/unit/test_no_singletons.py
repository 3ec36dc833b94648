"""No hidden singletons in the server (issue 11): state is built once where a process starts and passed.

The static half reads every module of backend/runcast_server: no ``functools.lru_cache`` /
``functools.cache``, no ``global`` statement, and no module-level container that the code
fills or changes at run time. The dynamic half builds two apps from two ``Settings`` in one
process and checks that each reads and writes its own database only, whatever the
environment says after they were built.
"""

from __future__ import annotations

import ast
import json
import os
from pathlib import Path
from typing import Any

import pytest
from services import ROOT

SERVER = ROOT / "backend" / "runcast_server"

# Module-level containers that are filled at run time but hold no state of a process:
# (module path under runcast_server, name) -> why.
ALLOWED: dict[tuple[str, str], str] = {
    ("ingest/bulk.py", "_PG_SQL"): "a memo of a pure function: the SQL text compiled from a table's name and "
    "columns (the same in every process, for every database); it holds no connection and no setting",
}

_CONTAINER_CALLS = {"dict", "list", "set", "defaultdict", "deque", "OrderedDict", "Counter", "bytearray",
                    "WeakValueDictionary", "WeakKeyDictionary", "WeakSet"}
_MUTATORS = {"append", "appendleft", "add", "update", "setdefault", "pop", "popleft", "popitem", "clear", "extend",
             "insert", "remove", "discard", "__setitem__", "__delitem__"}


def _is_container(value: ast.expr) -> bool:
    if isinstance(value, (ast.Dict, ast.List, ast.Set, ast.DictComp, ast.ListComp, ast.SetComp)):
        return True
    if isinstance(value, ast.Call):
        func = value.func
        name = func.id if isinstance(func, ast.Name) else func.attr if isinstance(func, ast.Attribute) else None
        return name in _CONTAINER_CALLS
    return False


def findings(source: str, module: str) -> list[str]:
    """What makes ``source`` (the module ``module``) hold process-wide state."""
    tree = ast.parse(source)
    out: list[str] = []
    containers: set[str] = set()
    for node in tree.body:
        if isinstance(node, ast.Assign):
            targets, value = node.targets, node.value
        elif isinstance(node, ast.AnnAssign) and node.value is not None:
            targets, value = [node.target], node.value
        else:
            continue
        if _is_container(value):
            containers.update(t.id for t in targets if isinstance(t, ast.Name) and (module, t.id) not in ALLOWED)
    for node in ast.walk(tree):
        line = f"{module}:{getattr(node, 'lineno', '?')}"
        if isinstance(node, ast.Global):
            out.append(f"{line}: global {', '.join(node.names)}")
        elif isinstance(node, ast.alias) and node.name in ("lru_cache", "cache", "functools.lru_cache"):
            out.append(f"{line}: imports {node.name}")
        elif isinstance(node, ast.Attribute) and node.attr in ("lru_cache", "cache") and (
                isinstance(node.value, ast.Name) and node.value.id == "functools"):
            out.append(f"{line}: functools.{node.attr}")
        elif (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr in _MUTATORS
              and isinstance(node.func.value, ast.Name) and node.func.value.id in containers):
            out.append(f"{line}: changes the module-level {node.func.value.id}")
        elif isinstance(node, (ast.Assign, ast.AugAssign, ast.Delete)):
            targets = node.targets if isinstance(node, (ast.Assign, ast.Delete)) else [node.target]
            for t in targets:
                if isinstance(t, ast.Subscript) and isinstance(t.value, ast.Name) and t.value.id in containers:
                    out.append(f"{line}: changes the module-level {t.value.id}")
    return out


def test_the_server_holds_no_process_wide_state() -> None:
    found = [f for path in sorted(SERVER.rglob("*.py"))
             for f in findings(path.read_text(encoding="utf-8"), path.relative_to(SERVER).as_posix())]
    assert found == [], "process-wide state in the server (build it in context.AppContext and pass it):\n" + "\n".join(
        found)


def test_every_allowed_container_still_exists() -> None:
    """An entry of ALLOWED whose name went away goes too (the list stays what is true)."""
    for module, name in ALLOWED:
        assert f"\n{name}" in "\n" + (SERVER / module).read_text(encoding="utf-8"), (module, name)


@pytest.mark.parametrize("source", [
    "from functools import lru_cache\n@lru_cache\ndef f(): pass\n",
    "import functools\n@functools.cache\ndef f(): pass\n",
    "_db = None\ndef bind(db):\n    global _db\n    _db = db\n",
    "_seen: dict[str, int] = {}\ndef see(k):\n    _seen[k] = 1\n",
    "_pool = []\ndef add(x):\n    _pool.append(x)\n",
])
def test_the_check_bites(source: str) -> None:
    assert findings(source, "example.py")


def test_the_check_lets_constants_be(source: str = "_CODES = {200: 'ok'}\nNAMES = ('a', 'b')\n"
                                     "def name(c):\n    return _CODES.get(c)\n") -> None:
    assert findings(source, "example.py") == []


# --- two apps, two databases, one process ------------------------------------------------------


def _batch(run: str, project: str, value: float) -> bytes:
    base = {"v": 1, "run": run, "segment": "seg_aaaaaaaa", "ts": 1.0}
    return json.dumps({"v": 1, "events": [
        {**base, "type": "run_started", "seq": 0, "project": project, "name": project},
        {**base, "type": "metrics", "seq": 1, "step": 1, "values": {"loss": value}},
    ]}).encode()


def test_two_apps_from_two_settings_use_two_databases(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from fastapi.testclient import TestClient
    from runcast_server.app import create_app
    from runcast_server.core.auth import create_token
    from runcast_server.core.settings import Settings
    from sqlalchemy import text

    for key in [k for k in os.environ if k.startswith("RUNCAST_")]:
        monkeypatch.delenv(key)
    first = Settings(data_dir=tmp_path / "a", database_url=None, redis_url=None)
    second = Settings(data_dir=tmp_path / "b", database_url=None, redis_url=None)
    # Whatever the environment says from now on, each app keeps to the settings it was built from.
    monkeypatch.setenv("RUNCAST_DATA_DIR", str(tmp_path / "elsewhere"))
    with TestClient(create_app(first)) as a, TestClient(create_app(second)) as b:
        apps: dict[str, Any] = {"a": a, "b": b}
        ctx = {name: client.app.state.context for name, client in apps.items()}
        assert ctx["a"].database is not ctx["b"].database
        assert ctx["a"].database.engine.url != ctx["b"].database.engine.url
        tokens = {}
        for name in apps:
            with ctx[name].database.scope() as session:
                tokens[name] = create_token(session, f"proj-{name}")
        # Interleaved writes: each batch lands in its app's database.
        for name, run, value in (("a", "run_aaaaaaaa", 1.0), ("b", "run_bbbbbbbb", 2.0), ("a", "run_cccccccc", 3.0)):
            r = apps[name].post("/api/v1/ingest", content=_batch(run, f"proj-{name}", value),
                                headers={"Authorization": f"Bearer {tokens[name]}", "Content-Type": "application/json"})
            assert r.status_code == 202, r.text
        listed = {name: sorted(r["id"] for r in client.get("/api/v1/runs").json()["runs"])
                  for name, client in apps.items()}
        assert listed == {"a": ["run_aaaaaaaa", "run_cccccccc"], "b": ["run_bbbbbbbb"]}
        for name, runs in listed.items():  # the batches were processed in their own database: points stored
            for run in runs:
                assert apps[name].get(f"/api/v1/runs/{run}").json()["last_step"] == 1, (name, run)
            with ctx[name].database.engine.connect() as conn:
                states = conn.execute(text("SELECT state FROM ingest_inbox")).scalars().all()
                points = conn.execute(text("SELECT count(*) FROM points JOIN series ON series.id = points.series_id "
                                           "WHERE series.key = 'loss'")).scalar_one()  # not the steps' times
            assert (states, points) == (["done"] * len(runs), len(runs)), name
        assert a.get("/api/v1/runs/run_bbbbbbbb").status_code == 404
        assert b.get("/api/v1/runs/run_aaaaaaaa").status_code == 404
        # A token is one database's: the other app does not know it.
        assert b.post("/api/v1/ingest", content=_batch("run_dddddddd", "proj-a", 4.0),
                      headers={"Authorization": f"Bearer {tokens['a']}",
                               "Content-Type": "application/json"}).status_code == 401
    assert (tmp_path / "a" / "runcast.db").exists() and (tmp_path / "b" / "runcast.db").exists()
    assert not (tmp_path / "elsewhere").exists()
