"""No hidden singletons in the server (issues 11, 27): state is built once where a process starts and passed.

The static half reads every module of backend/runcast_server: no ``functools.lru_cache`` /
``functools.cache``, no ``global`` statement, no module-level container that the code
fills or changes at run time, and no attribute set on a module-level object (a framework
object such as a Celery app, a function, a class or an imported module). The dynamic half
builds two apps from two ``Settings`` in one process and checks that each reads and writes
its own database only, whatever the environment says after they were built, and that no
object held by a module of the server gained an attribute; then it runs two Celery workers
of two settings in one process, each storing into its own database.
"""

from __future__ import annotations

import ast
import importlib
import json
import logging
import os
from collections.abc import Iterator
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
    ("ingest/bulk.py", "_SQLITE_STMT"): "the same memo for SQLite: the statement built from a table's name, "
    "columns and ON CONFLICT clause; it holds no connection and no setting",
    ("inbox/rows.py", "_CLAIMS"): "a memo of a pure function: an inbox row's claim statement, built for a "
    "dialect's name and the names of the columns it sets; it holds no connection and no setting",
    ("alerts/engine.py", "_STATEMENTS"): "a memo of a pure function: the statements of the detector states and "
    "of a signal's alert, built for a dialect's name; it holds no connection and no setting",
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


def _module_names(tree: ast.Module) -> set[str]:
    """The names a module binds at its top level (assignments, imports, functions, classes)."""
    names: set[str] = set()
    for node in tree.body:
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            names.update((a.asname or a.name).split(".")[0] for a in node.names)
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(node.name)
        elif isinstance(node, (ast.Assign, ast.AnnAssign, ast.AugAssign)):
            for t in node.targets if isinstance(node, ast.Assign) else [node.target]:
                names.update(n.id for n in ast.walk(t) if isinstance(n, ast.Name))
    return names


def _local_names(fn: ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda) -> set[str]:
    args = fn.args
    names = {a.arg for a in [*args.posonlyargs, *args.args, *args.kwonlyargs, args.vararg, args.kwarg] if a}
    for node in ast.walk(fn):
        if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
            names.add(node.id)
    return names


def attribute_writes(tree: ast.Module, module: str) -> list[str]:
    """``x.attr = ...`` (or ``+=``, ``del``, ``setattr(x, ...)``) where ``x`` is one of the module's
    top-level names and not a local of the function it is written in."""
    top = _module_names(tree)
    out: list[str] = []

    def visit(node: ast.AST, shadowed: set[str]) -> None:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
            shadowed = shadowed | _local_names(node)
        owners: list[ast.expr] = []
        if isinstance(node, (ast.Assign, ast.Delete)):
            owners = [t.value for t in node.targets if isinstance(t, ast.Attribute)]
        elif isinstance(node, (ast.AugAssign, ast.AnnAssign)) and isinstance(node.target, ast.Attribute):
            owners = [node.target.value]
        elif (isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in ("setattr", "delattr")
              and node.args):
            owners = [node.args[0]]
        for owner in owners:
            while isinstance(owner, (ast.Attribute, ast.Subscript)):  # app.conf.x = ...: app's
                owner = owner.value
            if isinstance(owner, ast.Name) and owner.id in top and owner.id not in shadowed:
                out.append(f"{module}:{node.lineno}: sets an attribute on the module-level {owner.id}")  # type: ignore[attr-defined]
        for child in ast.iter_child_nodes(node):
            visit(child, shadowed)

    visit(tree, set())
    return out


def findings(source: str, module: str) -> list[str]:
    """What makes ``source`` (the module ``module``) hold process-wide state."""
    tree = ast.parse(source)
    out: list[str] = attribute_writes(tree, module)
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
    # today's Celery app (issue 27): settings, context and metrics hung on the module's app
    "from celery import Celery\napp = Celery('runcast')\ndef configure(settings):\n    app.runcast_settings = settings\n",
    "import celery_app\ndef bind(ctx):\n    setattr(celery_app, 'context', ctx)\n",
    "def handler():\n    pass\nhandler.calls = 0\n",
    "from celery import Celery\napp = Celery('runcast')\ndef configure(url):\n    app.conf.broker_url = url\n",
])
def test_the_check_bites(source: str) -> None:
    assert findings(source, "example.py")


@pytest.mark.parametrize("source", [
    "_CODES = {200: 'ok'}\nNAMES = ('a', 'b')\ndef name(c):\n    return _CODES.get(c)\n",
    # a local or a parameter of the same name as a module-level one is the function's own object
    "app = None\ndef create():\n    app = object()\n    app.state = 1\n    return app\n",
    "class Celery:\n    pass\ndef make(app):\n    app.context = 1\n",
    "def build(settings):\n    ctx = object()\n    ctx.celery.context = ctx\n",
])
def test_the_check_lets_constants_and_locals_be(source: str) -> None:
    assert findings(source, "example.py") == []


# --- two apps, two databases, one process ------------------------------------------------------


def _batch(run: str, project: str, value: float) -> bytes:
    base = {"v": 1, "run": run, "segment": "seg_aaaaaaaa", "ts": 1.0}
    return json.dumps({"v": 1, "events": [
        {**base, "type": "run_started", "seq": 0, "project": project, "name": project},
        {**base, "type": "metrics", "seq": 1, "step": 1, "values": {"loss": value}},
    ]}).encode()


def _foreign_attributes() -> dict[tuple[str, str], set[str]]:
    """For each object a loaded module of the server holds at its top level (a Celery app, a router,
    a function, a class): its public attributes that its class does not define (an instance's
    lazily cached properties are its class's), i.e. the ones someone could have set on it."""
    import sys
    import types

    from celery.local import Proxy

    out: dict[tuple[str, str], set[str]] = {}
    for name, module in list(sys.modules.items()):
        if not name.startswith("runcast_server") or module is None:
            continue
        for attr, obj in list(vars(module).items()):
            # celery.current_app is a stand-in for the app the calling thread runs, not an object of its own
            if isinstance(obj, (types.ModuleType, Proxy)) or attr.startswith("__"):
                continue
            try:
                own = vars(obj)
            except TypeError:  # no __dict__: nothing can be set on it
                continue
            if isinstance(obj, type):  # a class: what its bases define is theirs to cache (bootsteps' `requires`)
                out[(name, attr)] = {k for k in own if not k.startswith("_")
                                     and not any(hasattr(base, k) for base in obj.__mro__[1:])}
            else:
                out[(name, attr)] = {k for k in own if not k.startswith("_") and not hasattr(type(obj), k)}
    return out


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
    importlib.import_module("runcast_server.metrics.export_parquet")  # the apps import it on a thread as they start
    before = _foreign_attributes()
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
        # Each app sends its tasks through a Celery app of its own, which runs them with its context.
        assert ctx["a"].celery is not ctx["b"].celery
        assert (ctx["a"].celery.context, ctx["b"].celery.context) == (ctx["a"], ctx["b"])
        # Nothing was hung on an object a module holds (issue 27: the module's Celery app carried
        # the settings, the context and the metrics, and the second app's replaced the first's).
        gained = {key: sorted(attrs - before.get(key, set())) for key, attrs in _foreign_attributes().items()}
        assert {key: attrs for key, attrs in gained.items() if attrs} == {}
    assert (tmp_path / "a" / "runcast.db").exists() and (tmp_path / "b" / "runcast.db").exists()
    assert not (tmp_path / "elsewhere").exists()


# --- two Celery workers, two databases, one process --------------------------------------------


@pytest.fixture
def logging_restored() -> Iterator[None]:
    """Celery's test worker sets up logging for the whole process (the root logger's level to ERROR,
    its handlers replaced): later tests in this process would capture no warning. Put it back."""
    root = logging.getLogger()
    level, handlers = root.level, root.handlers[:]
    loggers = {name: (lg.level, lg.propagate, lg.disabled, lg.handlers[:])
               for name, lg in logging.Logger.manager.loggerDict.items() if isinstance(lg, logging.Logger)}
    yield
    root.setLevel(level)
    root.handlers[:] = handlers
    for name, (lv, propagate, disabled, hs) in loggers.items():
        lg = logging.getLogger(name)
        lg.setLevel(lv)
        lg.propagate, lg.disabled = propagate, disabled
        lg.handlers[:] = hs


@pytest.mark.usefixtures("logging_restored")
def test_two_workers_of_two_settings_in_one_process_each_use_their_own_context(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A worker gets its context as the API does: built once at its start (``tasks._worker_start``,
    from the settings its Celery app was made from) and held by its own app. Two workers of two
    settings, started in one process, each store the batches sent to them in their own database."""
    import time

    from celery.contrib.testing.worker import start_worker
    from runcast_server.context import AppContext
    from runcast_server.core import migrate
    from runcast_server.core.auth import create_token
    from runcast_server.core.celery_app import RuncastCelery
    from runcast_server.core.settings import Settings
    from runcast_server.tasks import INGEST_TASK
    from sqlalchemy import text

    for key in [k for k in os.environ if k.startswith("RUNCAST_")]:
        monkeypatch.delenv(key)
    apps: dict[str, RuncastCelery] = {}
    for name in ("a", "b"):
        settings = Settings(data_dir=tmp_path / name, database_url=None, redis_url=None)
        settings.data_dir.mkdir(parents=True)
        migrate.upgrade(settings.sqlalchemy_url)
        celery = RuncastCelery(settings)
        # A broker of its own, without a server: kombu's filesystem transport in the app's data dir.
        broker = settings.data_dir / "broker"
        broker.mkdir()
        celery.conf.update(task_always_eager=False, broker_url="filesystem://",
                           broker_transport_options={"data_folder_in": str(broker), "data_folder_out": str(broker),
                                                     # else kombu writes its control exchange to ./control
                                                     "control_folder": str(broker / "control")})
        apps[name] = celery
    before = _foreign_attributes()
    with start_worker(apps["a"], perform_ping_check=False), start_worker(apps["b"], perform_ping_check=False):
        ctx: dict[str, AppContext] = {name: celery.context for name, celery in apps.items()}
        assert all(isinstance(c, AppContext) for c in ctx.values()) and ctx["a"] is not ctx["b"]
        assert (ctx["a"].celery, ctx["b"].celery) == (apps["a"], apps["b"])
        assert ctx["a"].metrics is not None and ctx["a"].metrics is not ctx["b"].metrics
        for name, run, value in (("a", "run_aaaaaaaa", 1.0), ("b", "run_bbbbbbbb", 2.0), ("a", "run_cccccccc", 3.0)):
            with ctx[name].database.scope() as session:
                token = create_token(session, f"proj-{name}")
            events = json.loads(_batch(run, f"proj-{name}", value))["events"]  # a message of the first contract
            apps[name].tasks[INGEST_TASK].apply_async(kwargs={"events": events, "project_id": None, "token": token})

        def stored(name: str) -> list[str]:
            with ctx[name].database.engine.connect() as conn:
                return sorted(conn.execute(text("SELECT id FROM runs WHERE last_step = 1")).scalars())

        def counted() -> dict[str, float | None]:
            return {name: c.metrics.registry.get_sample_value("runcast_ingest_points_stored_total")
                    for name, c in ctx.items() if c.metrics is not None}

        # Each worker stored its own batches and counted their points in its own instruments (the count
        # moves after the batch's commit, so a reader can see the rows a moment before it).
        want = ((["run_aaaaaaaa", "run_cccccccc"], ["run_bbbbbbbb"]), {"a": 2.0, "b": 1.0})
        deadline = time.monotonic() + 30
        while ((stored("a"), stored("b")), counted()) != want:
            assert time.monotonic() < deadline, ((stored("a"), stored("b")), counted())
            time.sleep(0.1)
    for c in ctx.values():
        c.close()
    gained = {key: sorted(attrs - before.get(key, set())) for key, attrs in _foreign_attributes().items()}
    assert {key: attrs for key, attrs in gained.items() if attrs} == {}
