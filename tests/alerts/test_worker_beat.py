"""``runcast worker --beat``: one worker that also runs Celery beat finds a stalled run by itself
(production mode: PostgreSQL, Redis, the worker with embedded beat, the API)."""

from __future__ import annotations

import time

import httpx
import services

from alerts.helpers import wait


def test_worker_with_embedded_beat_opens_a_stall_alert(stack):
    import runcast

    env = {**stack.env, "RUNCAST_ALERT_CHECK_INTERVAL_S": "1"}
    argv = [str(services.BIN / "runcast"), "worker", "--pool", "solo", "--concurrency", "1", "--beat"]
    worker = services.Process("worker-beat", argv, services.child_env(env), stack.log_dir / "worker-beat.log")
    stack.processes.append(worker)
    services.wait_until(lambda: worker.check_alive("starting") or " ready." in worker.output(), 60,
                        "worker with beat to report ready", interval=0.2)
    stack.start_api()
    token = stack.token("beat")
    run = runcast.init(project="beat", name="quiet", server=stack.api_url, token=token, capture_code=False,
                       flush_interval=0.2, heartbeat_interval=3600, alerts={"stall": {"after_s": 2}})
    try:
        for step in range(5):
            run.log({"loss": 2.0 - 0.1 * step}, step=step)
        assert run.flush(timeout=30)
        started = time.monotonic()

        def stall_alerts():  # type: ignore[no-untyped-def]
            r = httpx.get(f"{stack.api_url}/api/v1/runs/{run.id}/alerts", params={"kind": "stall"}, timeout=30)
            return r.json()["alerts"] if r.status_code == 200 else []

        # Nothing else sends the sweep: beat inside the worker does, every second.
        wait(stall_alerts, timeout=60, interval=0.5)
        assert time.monotonic() - started >= 2
        assert [a["state"] for a in stall_alerts()] == ["open"]
        assert "beat: Starting" in worker.output()
        assert (stack.data_dir / "celerybeat-schedule").exists() or list(stack.data_dir.glob("celerybeat-schedule*"))
    finally:
        run.finish(timeout=5)
