"""System metrics against a real `runcast serve` (embedded). Two training
processes with the variables torchrun sets (RANK, LOCAL_RANK, WORLD_SIZE, TORCHELASTIC_RUN_ID),
only rank 0 logging training metrics, both ranks' system series stored under
system/node0/rank<r>/, no GPU series on this GPU-less machine, the run's step untouched
and the host name nowhere in the public keys. And a resumed run that hangs while its sampler
goes on: segments, run and stall alert hold training steps, never the sampler's seconds."""

from __future__ import annotations

import socket
import subprocess
import sys
import textwrap
import uuid
from typing import Any

import httpx
from services import child_env

from integration.test_embedded import make_token

STEPS = 30
DRIVER = textwrap.dedent(
    """
    import sys, time
    import runcast

    run = runcast.init("sysm", "two-ranks", server=sys.argv[1], token=sys.argv[2], capture_code=False,
                       system_metrics=1.0)
    print("run", run.id, flush=True)
    for step in range(STEPS):
        run.log({"loss": 1.0 / (step + 1)}, step=step)  # a no-op on rank 1
        time.sleep(0.1)
    run.finish()
    """
).replace("STEPS", str(STEPS))


def test_two_ranks_store_their_system_series(processes) -> None:
    data_dir = processes.tmp / "data"
    processes.env = {"RUNCAST_DATA_DIR": str(data_dir)}
    processes.start_api()
    url = processes.api_url
    token = make_token(processes.env, "sysm", data_dir)
    launch = str(uuid.uuid4())
    drivers = []
    for rank in (0, 1):
        env = child_env({
            "RANK": str(rank), "LOCAL_RANK": str(rank), "WORLD_SIZE": "2", "LOCAL_WORLD_SIZE": "2",
            "GROUP_RANK": "0", "TORCHELASTIC_RUN_ID": launch, "RUNCAST_SPOOL_DIR": str(processes.tmp / f"spool{rank}"),
        })  # fmt: skip
        env.pop("RUNCAST_SYSTEM_INTERVAL")  # the init option decides
        drivers.append(subprocess.Popen([sys.executable, "-c", DRIVER, url, token], env=env, text=True,
                                        stdout=subprocess.PIPE, stderr=subprocess.PIPE))
    outs = [d.communicate(timeout=120) for d in drivers]
    for d, (_out, err) in zip(drivers, outs, strict=True):
        assert d.returncode == 0, err
    run_ids = {out.split()[1] for out, _ in outs}
    assert len(run_ids) == 1, "both ranks derive the run id from the launch"
    run_id = run_ids.pop()

    detail = httpx.get(f"{url}/api/v1/runs/{run_id}", timeout=30).json()  # anonymous: a public reader
    system_keys = sorted(k for k in detail["keys"] if k.startswith("system/"))
    rank0 = {k.removeprefix("system/node0/rank0/") for k in system_keys if k.startswith("system/node0/rank0/")}
    rank1 = {k.removeprefix("system/node0/rank1/") for k in system_keys if k.startswith("system/node0/rank1/")}
    assert len(system_keys) == len(rank0) + len(rank1)
    assert rank1 == {"cpu/process_percent", "memory/process_rss_mb"}  # per process only
    assert rank0 >= rank1 | {"cpu/system_percent", "memory/system_used_percent", "memory/system_available_mb"}
    assert not any("/gpu" in k for k in system_keys)
    assert socket.gethostname() not in " ".join(detail["keys"])
    assert [k for k in detail["keys"] if not k.startswith("system/")] == ["loss"]
    # The run's step and values are the training's, not the samples' wall-clock seconds.
    assert detail["last_step"] == STEPS - 1
    assert set(detail["last_values"]) == {"loss"}
    assert len(detail["segments"]) == 1

    for rank in (0, 1):
        key = f"system/node0/rank{rank}/memory/process_rss_mb"
        series = httpx.get(f"{url}/api/v1/runs/{run_id}/metrics", params={"key": key}, timeout=30).json()["series"]
        assert len(series) == 1
        steps, values = series[0]["step"], series[0]["last"]
        assert len(steps) >= 2 and steps == sorted(set(steps))
        assert all(abs(s - detail["started_at"]) < 120 for s in steps), "steps are wall-clock seconds"
        assert all(10 < v < 4096 for v in values), values  # a Python process's RSS in MiB


SAMPLING = textwrap.dedent(
    """
    import sys, time
    import runcast

    def start(**kw):
        return runcast.init("sysm", "sampled", server=sys.argv[1], token=sys.argv[2], capture_code=False,
                            system_metrics=1.0, heartbeat_interval=3600, alerts={"stall": {"after_s": 3}},
                            policy={"delay_s": 1}, **kw)

    first = start()
    for step in range(10):
        first.log({"loss": 1.0 / (step + 1)}, step=step)
    first.flush()
    second = start(resume=first.id, resume_step=5)  # the first process died: a resume from step 5
    print("run", first.id, flush=True)
    for step in range(5, 8):
        second.log({"loss": 1.0 / (step + 1)}, step=step)
        time.sleep(0.5)
    second.flush()
    time.sleep(60)  # training hangs; the samplers go on until the test kills the process
    """
)


def test_segments_and_the_stall_alert_hold_training_steps_not_sampler_seconds(processes, wait_for) -> None:
    """Issue 23 item 4: with system metrics on, ``segments[].last_step`` held the sampler's step,
    an epoch second. The run's, each segment's and the stall alert's last step are the training's,
    for the team (live) and for the public (the run is delayed by a second)."""
    data_dir = processes.tmp / "data"
    processes.env = {"RUNCAST_DATA_DIR": str(data_dir), "RUNCAST_ALERT_CHECK_INTERVAL_S": "1"}
    processes.start_api()
    url = processes.api_url
    token = make_token(processes.env, "sysm", data_dir)
    env = child_env({"RUNCAST_SPOOL_DIR": str(processes.tmp / "spool")})
    env.pop("RUNCAST_SYSTEM_INTERVAL")  # the init option decides
    driver = subprocess.Popen([sys.executable, "-c", SAMPLING, url, token], env=env, text=True,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        assert driver.stdout is not None
        run_id = driver.stdout.readline().split()[1]
        api = httpx.Client(base_url=f"{url}/api/v1", timeout=30)
        team = {"Authorization": f"Bearer {token}"}

        def samples_after(t: float) -> bool:  # the sampler's steps are epoch seconds
            key = "system/node0/rank0/memory/process_rss_mb"
            series = api.get(f"/runs/{run_id}/metrics", params={"key": key}, headers=team).json().get("series", [])
            return bool(series) and len([s for s in series[-1]["step"] if s > t]) >= 2

        def stall_alerts() -> Any:
            return api.get(f"/runs/{run_id}/alerts", params={"kind": "stall"}, headers=team).json()["alerts"]

        [opened] = wait_for(stall_alerts, 30, "the stall alert (samples are no heartbeat)")
        wait_for(lambda: samples_after(opened["opened_at"]), 30, "system samples after the stall alert opened")
        [alert] = stall_alerts()  # samples neither close it nor open another
        for who in ({}, team):  # the public sees the run a second late (policy/delay.py)
            detail = api.get(f"/runs/{run_id}", headers=who).json()
            assert detail["last_step"] == 9, who  # the run's highest training step, any segment
            assert [(s["start_step"], s["last_step"]) for s in detail["segments"]] == [(0, 9), (5, 7)], who
            assert any(k.startswith("system/") for k in detail["keys"])
        assert alert["state"] == "open" and alert["step"] == 9 and alert["evidence"]["open"]["last_step"] == 9
    finally:
        driver.kill()
        driver.communicate(timeout=30)
