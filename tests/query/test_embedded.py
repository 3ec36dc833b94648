"""``runcast.Api`` against a real embedded ``runcast serve`` (SQLite): reads, history, walls, updates."""

from __future__ import annotations

import pytest
from integration.test_embedded import make_token

from query import world
from query.checks import check_all


def test_the_query_client_on_runcast_serve(processes, tmp_path, monkeypatch: pytest.MonkeyPatch) -> None:
    data_dir = tmp_path / "data"
    processes.env = {"RUNCAST_DATA_DIR": str(data_dir)}
    processes.start_api()
    token = make_token(processes.env, "alpha", data_dir)
    other = make_token(processes.env, "beta", data_dir)
    made = world.make(processes.api_url, token, other, data_dir / "storage", tmp_path)
    check_all(made, tmp_path, monkeypatch)
