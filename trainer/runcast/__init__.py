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
from typing import TYPE_CHECKING, Any

from . import start as _start
from .current import ModuleRun
from .handshake import InitError
from .init_options import InitOptions
from .media import Histogram, Image, Table
from .run_handle import Run, RunStats

__version__ = "0.1.0"

__all__ = ["Api", "ApiError", "Histogram", "Image", "InitError", "InitOptions", "Run", "RunStats", "Table", "__version__", "config",
           "define_metric", "finish", "init", "log", "run", "summary"]

# The module API's state, in one object: runcast.run (the run the last init() made: set by init(),
# cleared by finish(), None at import) and the config and summary proxies. ``Run`` lives in
# runcast.run_handle, ``init`` in runcast.start.
_module = ModuleRun()
config = _module.config  # runcast.run.config of the current run
summary = _module.summary
if TYPE_CHECKING:
    run: Run | None  # runcast.run: read through __getattr__, so it is always _module.run


def __getattr__(name: str) -> Any:
    """``runcast.run`` (the current run), and ``runcast.Api`` and ``runcast.ApiError``, imported on
    first use (``import runcast`` stays light)."""
    if name == "run":
        return _module.run
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
    if reinit is True:
        reinit = "finish_previous"
    if reinit not in REINIT:
        raise ValueError(f"reinit must be one of {', '.join(map(repr, REINIT))}, got {reinit!r}")
    previous = _module.run
    if reinit == "finish_previous" and previous is not None and not previous.finished:
        logging.getLogger("runcast").warning(
            "runcast: init() while run %s is open: finishing run %s first (call finish() to end a run)",
            previous.id, previous.id)
        previous.finish()
    _module.run = None
    made = _start.init(*args, **kwargs)
    _module.run = made
    return made


init.__doc__ = f"{init.__doc__}\n\n{_start.init.__doc__}"
functools.update_wrapper(init, _start.init, assigned=(), updated=())  # __wrapped__: inspect.signature shows the real one


def log(metrics: Mapping[str, Any], step: int | None = None, commit: bool | None = None) -> None:
    """``runcast.run.log(metrics, step, commit)``; RuntimeError before ``runcast.init``."""
    _module.required("log").log(metrics, step, commit)


def define_metric(name: str, step_metric: str | None = None, **declaration: Any) -> None:
    """``runcast.run.define_metric(name, step_metric, ...)``; RuntimeError before ``runcast.init``."""
    _module.required("define_metric").define_metric(name, step_metric, **declaration)


def finish(status: str = "finished", timeout: float | None = None) -> None:
    """Finish ``runcast.run`` (if any) and clear it."""
    current, _module.run = _module.run, None
    if current is not None:
        current.finish(status, timeout)
