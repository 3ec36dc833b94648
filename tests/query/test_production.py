"""``runcast.Api`` against the production stack (PostgreSQL, Redis, a Celery worker, ``runcast serve``):
the same checks as on the embedded server, once the worker has stored every batch."""

from __future__ import annotations

import time

import pytest
import runcast
from runcast.query import ApiError

from query import world
from query.checks import check_all

pytestmark = pytest.mark.slow


def _stored(w: world.World, timeout: float = 120) -> None:
    """Wait until the worker stored both runs whole (the last batch of each holds its finish)."""
    deadline = time.monotonic() + timeout
    with runcast.Api(w.server, w.token) as api:
        while True:
            try:
                run, private = api.run(world.RUN), api.run(world.PRIVATE_RUN)
                if run.status == private.status == "finished" and len(run.segments) == 2:
                    points = sum(len(r) - 2 for r in world.untimed(run.history(pandas=False)))
                    if points == sum(len(r) - 2 for r in world.expected_rows()):
                        return
            except ApiError as exc:
                if exc.status != 404:
                    raise
            assert time.monotonic() < deadline, "the worker did not store the runs"
            time.sleep(0.2)


def test_the_query_client_on_the_production_stack(stack, tmp_path, monkeypatch: pytest.MonkeyPatch) -> None:
    stack.start_worker()
    stack.start_api()
    made = world.make(stack.api_url, stack.token("alpha"), stack.token("beta"), stack.data_dir / "storage", tmp_path)
    _stored(made)
    check_all(made, tmp_path, monkeypatch)
