"""Private by default: a real ``runcast train`` broadcast, read by the public and by its project.

No public read (REST JSON, the live stream and its Last-Event-ID replay, export, Atom feeds,
cards, a public subscriber's webhook) carries the server's data directory, the trainer's
paths, its host name or its process id; a reader with the project's token sees them; a
run started with ``public_paths`` shows them to everyone. Embedded and production mode.
"""

from __future__ import annotations

import json
from pathlib import Path

import httpx
import pytest

from alerts.helpers import Receiver, wait
from integration.privacy import PROJECT, StreamReader, leaks, public_reads, start_training, trainer_host

pytestmark = pytest.mark.slow

ALLOW = {"RUNCAST_WEBHOOK_ALLOW_CIDRS": "127.0.0.0/8", "RUNCAST_WEBHOOK_RETRY_BASE_S": "0.2"}


@pytest.fixture(params=["embedded", pytest.param("production", marks=pytest.mark.services)])
def server(request: pytest.FixtureRequest, tmp_path: Path) -> tuple[str, str, Path]:
    """(url, token of PROJECT, the server's data directory)."""
    if request.param == "production":
        stack = request.getfixturevalue("stack")
        stack.start_worker(**ALLOW)
        stack.start_api(**ALLOW)
        return stack.api_url, stack.token(PROJECT), stack.data_dir
    processes = request.getfixturevalue("processes")
    data = tmp_path / "server-data"
    env = {"RUNCAST_DATA_DIR": str(data), **ALLOW}
    token = processes.cli("token", "create", "--project", PROJECT, **env).stdout.strip().splitlines()[-1]
    processes.start_api(**env)
    return processes.api_url, token, data


def test_public_reads_never_show_paths_host_or_pid(server: tuple[str, str, Path], tmp_path: Path) -> None:
    url, token, data = server
    receiver = Receiver()
    out_dir = data / "storage" / PROJECT / "private-run"  # in the project's storage: found in place, not uploaded
    # The public subscribes to the project before the run starts: its spike may be stored
    # (and alerted on) in the trainer's first batch.
    sub = httpx.post(f"{url}/api/v1/subscriptions", json={"project": PROJECT, "channel": "webhook", "url": receiver.url},
                     timeout=30)
    assert sub.status_code == 201, sub.text
    training = start_training(url, token, out_dir, tmp_path)
    run_id = training.wait_for_run(url)
    # The trainer waits while the streams join: a small run can otherwise finish (even in one
    # batch) before they connect. From Last-Event-ID 0, what committed before is replayed first.
    training.pause()
    live_public = StreamReader(url, run_id, last_event_id=0)
    live_project = StreamReader(url, run_id, token=token, last_event_id=0)
    assert live_public.connected.wait(60) and live_project.connected.wait(60)
    training.finish()

    api = httpx.Client(base_url=f"{url}/api/v1", timeout=30)
    project = httpx.Client(base_url=f"{url}/api/v1", timeout=30, headers={"Authorization": f"Bearer {token}"})
    # The project's reader sees where the run ran.
    detail = project.get(f"/runs/{run_id}").json()
    pid = detail["env"]["pid"]
    assert isinstance(pid, int) and detail["env"]["host"] == trainer_host()
    assert detail["config"]["out_dir"] == str(out_dir) and detail["public_paths"] is False
    checkpoints = [e["payload"] for e in project.get(f"/runs/{run_id}/events", params={"type": "checkpoint"}).json()["events"]]
    assert [(p["path"], p["filename"]) for p in checkpoints[:2]] == [
        (str(out_dir / "ckpt_0000010.pt"), "ckpt_0000010.pt"), (str(out_dir / "ckpt_0000020.pt"), "ckpt_0000020.pt")]
    assert str(out_dir / "ckpt_0000010.pt") in live_project.text()
    assert str(out_dir) in project.get(f"/runs/{run_id}/alerts").text  # the checkpoints around the spike

    secrets = {"data directory": str(data), "trainer's out_dir": str(out_dir), "host name": trainer_host(),
               "pid": str(pid)}
    reads = public_reads(api, run_id)
    reads["live stream"] = live_public.text()
    reads["stream replayed from Last-Event-ID 0"] = StreamReader(url, run_id, last_event_id=0).text()
    wait(lambda: receiver.requests, timeout=60)  # the spike's alert reached the public subscriber
    for i, request in enumerate(receiver.requests):
        reads[f"webhook {i}"] = request["body"].decode()
    receiver.close()
    assert {name: found for name, text in reads.items() if (found := leaks(text, secrets))} == {}

    # What the public does see: file names, sizes and digests; the rest marked withheld.
    public = api.get(f"/runs/{run_id}").json()
    assert public["env"]["host"] == public["env"]["pid"] == public["config"]["out_dir"] == "[withheld]"
    assert public["env"]["python"] == detail["env"]["python"] and public["config"]["n_embd"] == 32
    shown = [e["payload"] for e in api.get(f"/runs/{run_id}/events", params={"type": "checkpoint"}).json()["events"]]
    assert [p["filename"] for p in shown] == [p["filename"] for p in checkpoints]
    assert all("path" not in p for p in shown)
    # A digest is public; a file retention deleted before the trainer hashed it has none.
    assert all(p["size"] > 0 and (p["sha256"] is None or len(p["sha256"]) == 64) for p in shown if p["status"] == "available")
    assert len([p for p in shown if p["status"] == "available"][-1]["sha256"]) == 64
    alert = json.loads(reads["webhook 0"])["alert"]
    assert alert["checkpoints"]["before"]["filename"] == "ckpt_0000010.pt"
    assert "path" not in alert["checkpoints"]["before"]


def test_a_run_that_opts_in_shows_its_paths_to_everyone(processes, tmp_path: Path) -> None:
    data = tmp_path / "server-data"
    env = {"RUNCAST_DATA_DIR": str(data)}
    token = processes.cli("token", "create", "--project", PROJECT, **env).stdout.strip().splitlines()[-1]
    processes.start_api(**env)
    out_dir = data / "storage" / PROJECT / "open-run"
    training = start_training(processes.api_url, token, out_dir, tmp_path, "--public-paths")
    run_id = training.wait_for_run(processes.api_url)
    training.finish()
    api = httpx.Client(base_url=f"{processes.api_url}/api/v1", timeout=30)
    detail = api.get(f"/runs/{run_id}").json()
    assert detail["public_paths"] is True and detail["env"]["host"] == trainer_host()
    assert isinstance(detail["env"]["pid"], int) and detail["config"]["out_dir"] == str(out_dir)
    first = api.get(f"/runs/{run_id}/events", params={"type": "checkpoint"}).json()["events"][0]["payload"]
    assert first["path"] == str(out_dir / "ckpt_0000010.pt") and first["filename"] == "ckpt_0000010.pt"
    assert str(out_dir) in StreamReader(processes.api_url, run_id, last_event_id=0).text()
