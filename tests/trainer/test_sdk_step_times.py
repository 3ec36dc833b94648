"""Each logged step's wall time, from the SDK user's seat: a run logs as usual and the server
holds ``_timestamp`` (the time of each ``log()``, to 0.1 s), on the embedded default and on the
PostgreSQL + Redis + Celery stack; logging ``_timestamp`` yourself is refused at ``log()``."""

from __future__ import annotations

import time
from typing import Any

import httpx
import pytest
import runcast

pytestmark = pytest.mark.slow


@pytest.fixture(params=["embedded", "stack"])
def target(request: pytest.FixtureRequest, tmp_path: Any) -> tuple[str, str]:
    """(server url, token of project "timed") of a fresh server of each kind."""
    if request.param == "embedded":
        processes = request.getfixturevalue("processes")
        env = {"RUNCAST_DATA_DIR": str(tmp_path / "data")}
        token = processes.cli("token", "create", "--project", "timed", **env).stdout.strip().splitlines()[-1]
        processes.start_api(**env)
        return str(processes.api_url), token
    stack = request.getfixturevalue("stack")
    stack.start_worker()
    stack.start_api()
    return str(stack.api_url), stack.token("timed")


def _times(url: str, run_id: str) -> dict[int, dict[int, float]]:
    for _ in range(100):  # the stack stores a batch after it answers 202
        body = httpx.get(f"{url}/api/v1/runs/{run_id}/metrics", params={"key": "_timestamp", "max_points": 20000},
                         timeout=10).json()
        if "series" in body:
            return {s["segment"]: dict(zip(s["step"], s["last"], strict=True)) for s in body["series"]}
        time.sleep(0.1)
    raise AssertionError(body)


def test_every_step_gets_the_time_of_its_log_call(target: tuple[str, str], tmp_path: Any) -> None:
    url, token = target
    clock: dict[int, tuple[float, float]] = {}
    with runcast.init(project="timed", server=url, token=token, dir=tmp_path / "spool") as run:
        for step in range(5):  # a real run's pace: every step its own time
            before = time.time()
            run.log({"loss": 1.0 / (1 + step)})
            clock[step] = (before, time.time())
            time.sleep(0.15)
        with pytest.raises(ValueError, match="'_timestamp': reserved"):
            run.log({"loss": 0.0, "_timestamp": 1.0})
        start = time.time()
        for _ in range(3000):  # as fast as the SDK goes
            run.log({"loss": 0.5})
        burst = time.time() - start
        run_id = run.id
    for _ in range(100):
        times = _times(url, run_id)
        if max(times.get(0, {0: 0})) >= 5:
            break
        time.sleep(0.1)
    (seg,) = times.values()
    assert all(clock[s][0] <= seg[s] <= clock[s][1] for s in range(5))
    thinned = [s for s in seg if s >= 5]
    # about ten a second of the burst, plus at most one more a batch (the SDK's batches)
    assert 1 <= len(thinned) <= burst * 10 + 1 + 3000 // 100 and len(thinned) < 3000
    assert list(seg.values()) == sorted(seg.values())
    detail = httpx.get(f"{url}/api/v1/runs/{run_id}", timeout=10).json()
    assert detail["keys"] == ["loss"] and "_timestamp" not in detail["last_values"]
