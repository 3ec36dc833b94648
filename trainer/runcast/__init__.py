"""Runcast SDK: broadcast a training run.

    import runcast
    run = runcast.init(project="tinygpt", config=cfg, server="http://host:8000", token=TOKEN)
    run.log({"train/loss": loss, "lr": lr}, step=step)
    run.finish()

Read runs back (``runcast.Api``, imported on first use): ``runcast.Api().run(id).history()``.

or, module-level: ``runcast.init(...)``, ``runcast.log({...})``, ``runcast.finish()``;
``runcast.run`` is the run the last ``init`` made (None before, and after ``finish``);
``runcast.config``, ``runcast.summary`` and ``runcast.define_metric`` act on it. A second
``init`` before ``finish`` finishes the previous run first, with a warning (as W&B does).

Importing this package needs only the standard library and httpx (torch and numpy
are used only when present and needed). See docs/sdk.md.
"""

from __future__ import annotations

import functools
import importlib
import logging
from collections.abc import Mapping
from typing import Any

from . import start as _start
from .current import Current
from .handshake import InitError
from .init_options import InitOptions
from .media import Histogram, Image, Table
from .run import Run, RunStats

__version__ = "0.1.0"

__all__ = ["Api", "ApiError", "Histogram", "Image", "InitError", "InitOptions", "Run", "RunStats", "Table", "__version__", "config",
           "define_metric", "finish", "init", "log", "run", "summary"]

# The run the last init() made: state set by init() and cleared by finish(), nothing at import.
# (This name shadows the submodule runcast.run as an attribute; import from it with
# ``from runcast.run import ...``. ``init`` itself lives in runcast.start.)
run: Run | None = None
config = Current("config", lambda: run)  # runcast.run.config of the current run
summary = Current("summary", lambda: run)


def __getattr__(name: str) -> Any:
    """``runcast.Api`` and ``runcast.ApiError``, imported on first use (``import runcast`` stays light)."""
    if name in ("Api", "ApiError"):
        # By name, not an import statement: the package that trainers and integrations import
        # does not depend on the query client (which reuses runcast.cli.download) until it is used.
        return getattr(importlib.import_module("runcast.query"), name)
    raise AttributeError(f"module 'runcast' has no attribute {name!r}")


REINIT = ("finish_previous", "create_new")


def init(*args: Any, reinit: str | bool = "finish_previous", **kwargs: Any) -> Run:
    """Start a run (every argument of ``runcast.start.init``, docs/sdk.md) and make it ``runcast.run``.

    ``reinit`` (W&B's keyword): ``"finish_previous"`` (default; ``True`` too) finishes the run
    ``runcast.run`` holds when it is still open; ``"create_new"`` leaves it open (several runs in
    one process; finish each yourself)."""
    global run
    if reinit is True:
        reinit = "finish_previous"
    if reinit not in REINIT:
        raise ValueError(f"reinit must be one of {', '.join(map(repr, REINIT))}, got {reinit!r}")
    previous = run
    if reinit == "finish_previous" and previous is not None and not previous.finished:
        logging.getLogger("runcast").warning(
            "runcast: init() while run %s is open: finishing run %s first (call finish() to end a run)",
            previous.id, previous.id)
        previous.finish()
    run = None
    made = _start.init(*args, **kwargs)
    run = made
    return made


init.__doc__ = f"{init.__doc__}\n\n{_start.init.__doc__}"
functools.update_wrapper(init, _start.init, assigned=(), updated=())  # __wrapped__: inspect.signature shows the real one


def log(metrics: Mapping[str, Any], step: int | None = None, commit: bool | None = None) -> None:
    """``runcast.run.log(metrics, step, commit)``; RuntimeError before ``runcast.init``."""
    _current("log").log(metrics, step, commit)


def define_metric(name: str, step_metric: str | None = None, **declaration: Any) -> None:
    """``runcast.run.define_metric(name, step_metric, ...)``; RuntimeError before ``runcast.init``."""
    _current("define_metric").define_metric(name, step_metric, **declaration)


def _current(verb: str) -> Run:
    if run is None:
        raise RuntimeError(f"runcast.{verb}() needs a run: call runcast.init(...) first")
    return run


def finish(status: str = "finished", timeout: float | None = None) -> None:
    """Finish ``runcast.run`` (if any) and clear it."""
    global run
    current, run = run, None
    if current is not None:
        current.finish(status, timeout)
