"""Whether the server stores samples, evaluations and media and serves their reads (docs/samples.md).

Until the outputs server core lands, the ingest takes ``sample``, ``eval`` and ``media`` events
(202) and stores none of them. Round-trip tests read back through the routes and skip while
they are missing::

    @needs_outputs_core
    def test_...(hub): ...
"""

from __future__ import annotations

import functools
import importlib
import pkgutil

import pytest


@functools.cache
def server_stores_outputs() -> bool:
    """True when a route module of the app serves ``GET /runs/{run_id}/evals`` (and so the other outputs' reads)."""
    from runcast_server.api import routes

    for info in pkgutil.iter_modules(routes.__path__):
        router = getattr(importlib.import_module(f"{routes.__name__}.{info.name}"), "router", None)
        if any(getattr(route, "path", None) == "/runs/{run_id}/evals" for route in getattr(router, "routes", ())):
            return True
    return False


needs_outputs_core = pytest.mark.skipif(not server_stores_outputs(), reason="needs the outputs server core")
