"""The route label of /metrics' latency histogram: every API route's full template, worked out
from the request alone (observability.http.route_template), equals FastAPI's own."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
from fastapi.routing import APIRoute, iter_route_contexts
from runcast_server.observability.http import route_template

SAMPLES = {"str": "run-x1", "path": "dir/a b.pt"}


def _fill(template: str, convertors: dict[str, Any]) -> tuple[str, dict[str, Any]]:
    params = {name: SAMPLES["path" if type(c).__name__ == "PathConvertor" else "str"] for name, c in convertors.items()}
    return re.sub(r"{(\w+)}", lambda m: str(params[m[1]]), template), params


def test_every_api_route_s_label_is_its_full_template(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from runcast_server.app import create_app
    from runcast_server.core.settings import Settings

    monkeypatch.setenv("RUNCAST_DATA_DIR", str(tmp_path))
    app = create_app(Settings())
    contexts = [c for c in iter_route_contexts(app.routes) if isinstance(c.original_route, APIRoute)]
    assert len(contexts) > 80
    for context in contexts:
        route = context.original_route
        assert isinstance(route, APIRoute)
        path, params = _fill(context.path_format, route.param_convertors)
        assert route_template({"path": path, "path_params": params, "route": route}) == context.path_format


def test_no_label_for_what_is_not_an_api_route() -> None:
    assert route_template({"path": "/static/app.js", "path_params": {}}) is None
