"""System metrics of two ranks against a real `runcast serve` (embedded): two training
processes with the variables torchrun sets (RANK, LOCAL_RANK, WORLD_SIZE, TORCHELASTIC_RUN_ID),
only rank 0 logging training metrics, both ranks' system series stored under
system/node0/rank<r>/, no GPU series on this GPU-less machine, the run's step untouched
and the host name nowhere in the public keys."""

from __future__ import annotations

import socket
import subprocess
import sys
import textwrap
import uuid

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

    detail = httpx.get(f"{url}/api/v1/runs/{run_id}").json()  # anonymous: a public reader
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
        series = httpx.get(f"{url}/api/v1/runs/{run_id}/metrics", params={"key": key}).json()["series"]
        assert len(series) == 1
        steps, values = series[0]["step"], series[0]["last"]
        assert len(steps) >= 2 and steps == sorted(set(steps))
        assert all(abs(s - detail["started_at"]) < 120 for s in steps), "steps are wall-clock seconds"
        assert all(10 < v < 4096 for v in values), values  # a Python process's RSS in MiB
