"""Runcast SDK: broadcast a training run.

    import runcast
    run = runcast.init(project="tinygpt", config=cfg, server="http://host:8000", token=TOKEN)
    run.log({"train/loss": loss, "lr": lr}, step=step)
    run.finish()

Read runs back (``runcast.Api``, imported on first use): ``runcast.Api().run(id).history()``.

or, module-level: ``runcast.init(...)``, ``runcast.log({...})``, ``runcast.finish()``;
``runcast.run`` is the run the last ``init`` made (None before, and after ``finish``).

Importing this package needs only the standard library and httpx (torch and numpy
are used only when present and needed). See docs/sdk.md.
"""

from __future__ import annotations

import functools
import importlib
from collections.abc import Mapping
from typing import Any

from . import start as _start
from .handshake import InitError
from .media import Histogram, Image, Table
from .run import Run, RunStats

__version__ = "0.1.0"

__all__ = ["Api", "ApiError", "Histogram", "Image", "InitError", "Run", "RunStats", "Table", "__version__", "finish", "init", "log", "run"]

# The run the last init() made: state set by init() and cleared by finish(), nothing at import.
# (This name shadows the submodule runcast.run as an attribute; import from it with
# ``from runcast.run import ...``. ``init`` itself lives in runcast.start.)
run: Run | None = None


def __getattr__(name: str) -> Any:
    """``runcast.Api`` and ``runcast.ApiError``, imported on first use (``import runcast`` stays light)."""
    if name in ("Api", "ApiError"):
        # By name, not an import statement: the package that trainers and integrations import
        # does not depend on the query client (which reuses runcast.cli.download) until it is used.
        return getattr(importlib.import_module("runcast.query"), name)
    raise AttributeError(f"module 'runcast' has no attribute {name!r}")


def init(*args: Any, **kwargs: Any) -> Run:
    """Start a run (every argument of ``runcast.start.init``, docs/sdk.md) and make it ``runcast.run``."""
    global run
    made = _start.init(*args, **kwargs)
    run = made
    return made


init.__doc__ = f"{init.__doc__}\n\n{_start.init.__doc__}"
functools.update_wrapper(init, _start.init, assigned=(), updated=())  # __wrapped__: inspect.signature shows the real one


def log(metrics: Mapping[str, Any], step: int | None = None) -> None:
    """``runcast.run.log(metrics, step)``; RuntimeError before ``runcast.init``."""
    if run is None:
        raise RuntimeError("runcast.log() needs a run: call runcast.init(...) first")
    run.log(metrics, step)


def finish(status: str = "finished", timeout: float | None = None) -> None:
    """Finish ``runcast.run`` (if any) and clear it."""
    global run
    current, run = run, None
    if current is not None:
        current.finish(status, timeout)
