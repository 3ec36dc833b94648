"""Outages: spool to disk, replay in order when the service is back, ``runcast sync``."""

from __future__ import annotations

import json
import logging
import re

import pytest
import runcast
from runcast.wire import events
from runcast.cli.main import app
from runcast.sender.spool import REFUSED, Spool, find_spools
from runcast.sender.spool_replay import replay
from runcast.sender.transport import HttpTransport
from sdk_receiver import Receiver, free_port
from typer.testing import CliRunner


def _metrics_steps(r: Receiver, segment: str) -> list[int]:
    return [e["step"] for e in r.events() if e["type"] == "metrics" and e["segment"] == segment]


@pytest.mark.parametrize("outage", ["refused", "503"])
def test_outage_spools_then_replays_in_order_exactly_once(make_run, tmp_path, outage, caplog):
    server = Receiver(free_port())
    if outage == "503":
        server.start()
        server.mode = "fail"
    try:
        run = make_run(server=server.url, batch_size=10)
        with caplog.at_level(logging.WARNING, logger="runcast"):
            for step in range(50):
                run.log({"loss": 1 / (step + 1), "step": float(step)}, step=step)
            assert run.flush() is False  # everything went to the spool
        assert run.stats.spooled == 51 and run.stats.sent == 0
        [spool_dir] = find_spools(tmp_path / "spool")
        assert spool_dir.name == f"{run.id}.{run.segment}"
        on_disk = b"".join(p.read_bytes() for p in spool_dir.iterdir() if p.is_file())
        assert b"tok-123" not in on_disk  # the token never touches the disk
        assert sum("spooling" in r.getMessage() for r in caplog.records) == 1

        if outage == "503":
            server.mode = "ok"
        else:
            server.start()
        server.wait_for(lambda: len(server.events()) >= 51)
        for step in range(50, 80):  # live again: new events follow the replayed ones
            run.log({"loss": 0.0, "step": float(step)}, step=step)
        run.finish()
        received = server.events()
        assert [e["seq"] for e in received] == list(range(82))
        assert _metrics_steps(server, run.segment) == list(range(80))
        assert run.stats.replayed == 51 and run.stats.sent == 82 and run.stats.dropped == 0
        assert not spool_dir.exists()  # fully replayed: deleted
    finally:
        server.stop()


def test_replay_resumes_from_the_durable_offset(tmp_path, receiver):
    meta = {"run": "run-aaaaaaaa", "segment": "seg-bbbbbbbb", "url": receiver.url, "created": 1.0}
    spool = Spool.create(tmp_path, meta)
    bodies = []
    for seq in range(3):
        event = {"v": 1, "type": "heartbeat", "run": meta["run"], "segment": meta["segment"],
                 "seq": seq, "ts": 1.0, "step": None}
        bodies.append(events.dumps_batch([event]))
        spool.append(bodies[-1])
    transport = HttpTransport(receiver.url, "t")
    first = replay(spool, transport, max_batches=1)
    assert first.sent_batches == 1 and not first.done
    spool.close()  # as if the process died here

    spool = Spool.open(tmp_path / "run-aaaaaaaa.seg-bbbbbbbb")
    rest = replay(spool, transport)
    assert rest.done and rest.sent_batches == 2
    assert [b["events"][0]["seq"] for b in receiver.bodies] == [0, 1, 2]  # nothing resent
    spool.remove()
    assert not (tmp_path / "run-aaaaaaaa.seg-bbbbbbbb").exists()
    transport.close()


def test_a_torn_last_line_is_ignored(tmp_path, receiver):
    spool = Spool.create(tmp_path, {"run": "run-aaaaaaaa", "segment": "seg-cccccccc", "created": 1.0})
    event = {"v": 1, "type": "heartbeat", "run": "run-aaaaaaaa", "segment": "seg-cccccccc", "seq": 0, "ts": 1.0}
    spool.append(events.dumps_batch([event]))
    with open(spool.path / "batches.jsonl", "ab") as handle:
        handle.write(b'{"v":1,"events":[{"ty')  # a crash in the middle of an append
    transport = HttpTransport(receiver.url, "t")
    result = replay(spool, transport)
    assert result.done and result.sent_events == 1
    spool.close()
    transport.close()


def test_offline_run_then_runcast_sync(make_run, tmp_path, caplog):
    run = make_run(server=None, transport=None)
    assert run.url is None
    for step in range(25):
        run.log({"a": float(step)})
    with caplog.at_level(logging.WARNING, logger="runcast"):
        run.finish()
    assert run.stats.spooled == 27 and run.stats.sent == 0
    assert any("runcast sync" in r.getMessage() for r in caplog.records)
    spool_root = tmp_path / "spool"
    # resumed from the checkpoint of step 24: log() counts on at 25
    second = make_run(server=None, transport=None, resume=run.id, resume_step=24)
    second.log({"a": 99.0})
    second.finish()

    server = Receiver().start()
    try:
        cli = CliRunner()
        result = cli.invoke(app, ["sync", str(spool_root), "--server", server.url, "--token", "sync-tok"])
        assert result.exit_code == 0, result.output
        assert "sent 30 events from 2 spool(s)" in result.output
        assert set(server.auth) == {"Bearer sync-tok"}
        assert [e["segment"] for e in server.of_type("run_started")] == [run.segment, second.segment]
        assert _metrics_steps(server, run.segment) == list(range(25))
        assert _metrics_steps(server, second.segment) == [25]
        assert find_spools(spool_root) == []
        again = cli.invoke(app, ["sync", str(spool_root), "--server", server.url])
        assert again.exit_code == 0 and "no spools" in again.output
    finally:
        server.stop()


def test_sync_fails_and_keeps_the_spool_when_the_service_is_down(make_run, tmp_path, monkeypatch):
    run = make_run(server=None, transport=None)
    run.log({"a": 1.0})
    run.finish()
    monkeypatch.setenv("RUNCAST_TOKEN", "t")
    down = f"http://127.0.0.1:{free_port()}"
    result = CliRunner().invoke(app, ["sync", str(tmp_path / "spool"), "--server", down, "--timeout", "1"])
    assert result.exit_code == 1
    assert "stays spooled" in result.output
    assert len(find_spools(tmp_path / "spool")) == 1


def test_sync_stops_on_a_wrong_token_without_discarding(make_run, tmp_path):
    run = make_run(server=None, transport=None)
    run.log({"a": 1.0})
    run.finish()
    server = Receiver().start()
    server.mode = "unauthorized"
    try:
        result = CliRunner().invoke(app, ["sync", str(tmp_path / "spool"), "--server", server.url, "--token", "x"])
        assert result.exit_code == 1 and "unknown token" in result.output
        assert len(find_spools(tmp_path / "spool")) == 1  # kept for a retry with the right token
        server.mode = "ok"
        result = CliRunner().invoke(app, ["sync", str(tmp_path / "spool"), "--server", server.url, "--token", "y"])
        assert result.exit_code == 0 and len(server.events()) == 3
    finally:
        server.stop()


def test_sync_sets_refused_batches_aside_and_never_deletes_them(make_run, tmp_path):
    run = make_run(server=None, transport=None)
    run.log({"a": 1.0})
    run.finish()
    root = tmp_path / "spool"
    [path] = find_spools(root)
    server = Receiver().start()
    server.mode = "reject"
    try:
        cli = CliRunner()
        result = cli.invoke(app, ["sync", str(root), "--server", server.url, "--token", "x"])
        assert result.exit_code == 1, result.output
        assert "refused 1 batch(es), 3 events: HTTP 422: bad event" in result.output
        assert f"runcast sync --retry-refused {path}" in result.output
        assert find_spools(root) == [path]  # kept, with the server's answer beside each batch
        [line] = (path / REFUSED).read_text().splitlines()
        kept = json.loads(line)
        assert kept["status"] == 422 and kept["events"] == 3 and len(kept["batch"]["events"]) == 3
        assert server.spool_reports[-1] == (f"/api/v1/runs/{run.id}/segments/{run.segment}/spool", {"events": 3})

        server.mode = "ok"  # the cause is fixed; a plain sync still says what is set aside
        again = cli.invoke(app, ["sync", str(root), "--server", server.url, "--token", "x"])
        assert again.exit_code == 1 and "refused by an earlier sync" in again.output and server.bodies == []
        retried = cli.invoke(app, ["sync", str(root), "--server", server.url, "--token", "x", "--retry-refused"])
        assert retried.exit_code == 0, retried.output
        assert [e["type"] for e in server.events()] == ["run_started", "metrics", "finished"]
        assert find_spools(root) == [] and not path.exists()
        assert server.spool_reports[-1][1] == {"events": 0}
    finally:
        server.stop()


def _spool_of(tmp_path, steps: int, per_line: int) -> tuple[Spool, str]:
    """A spool as an older SDK (or another server's limit) wrote it: lines of ``per_line`` events."""
    run, segment = events.new_id(), events.new_id()
    spool = Spool.create(tmp_path / "spool", {"run": run, "segment": segment, "project": "p", "name": "n",
                                              "url": None, "created": 1.0})
    wire = [events.validate_event({"type": "metrics", "run": run, "segment": segment, "seq": i, "ts": 1.0,
                                   "step": i, "values": {"loss": 1.0}}) for i in range(steps)]
    for start in range(0, steps, per_line):
        spool.append(events.dumps_batch(wire[start:start + per_line]))
    spool.close()
    return spool, segment


@pytest.mark.parametrize(("whoami", "receiver_max", "largest"), [
    (None, 5000, 1000),  # a server that does not say: what every server takes
    ({"project": "p", "max_batch_events": 5000}, 5000, 5000),
    ({"project": "p", "max_batch_events": 5000}, 700, 625),  # it said more than it takes: halved until taken
    ({"project": "p", "max_batch_events": 20_000}, 20_000, 20_000),
    ({"project": "p", "max_batch_events": 20_000}, 5000, 5000),  # told 20,000, then downgraded to 5000
])
def test_sync_splits_spooled_batches_to_what_the_server_takes(tmp_path, whoami, receiver_max, largest):
    spool, segment = _spool_of(tmp_path, 47_750, 47_750)  # one line, as the overflow of a burst became
    server = Receiver().start()
    server.whoami, server.max_events = whoami, receiver_max
    try:
        result = CliRunner().invoke(app, ["sync", str(spool.path), "--server", server.url, "--token", "t", "-q"])
        assert result.exit_code == 0, result.output
        assert "sent 47750 events" in result.output
        assert [e["step"] for e in server.of_type("metrics")] == list(range(47_750))
        assert max(len(b["events"]) for b in server.bodies) == largest
        assert not spool.path.exists()
    finally:
        server.stop()


def test_replay_sends_a_spool_in_batches_the_server_takes(make_run, tmp_path, receiver):
    spool, segment = _spool_of(tmp_path, 3000, 3000)
    receiver.max_events = 1000
    result = replay(Spool.open(spool.path), HttpTransport(receiver.url, "t"), max_events=1000)
    assert result.done and result.sent_events == 3000 and not result.rejections
    assert [len(b["events"]) for b in receiver.bodies] == [1000, 1000, 1000]


def test_sync_uses_the_recorded_url(make_run, receiver, tmp_path):
    # A run that spooled while its server was down records the URL (never the token).
    down = Receiver(free_port())
    run = make_run(server=down.url, finish_timeout=0.2)
    run.log({"a": 1.0})
    run.finish()
    [path] = find_spools(tmp_path / "spool")
    assert json.loads((path / "meta.json").read_text())["url"] == down.url
    down.start()
    try:
        result = CliRunner().invoke(app, ["sync", str(path), "--token", "t"])
        assert result.exit_code == 0, result.output
        assert [e["type"] for e in down.events()] == ["run_started", "metrics", "finished"]
    finally:
        down.stop()


def test_spool_urls_never_carry_credentials(make_run, tmp_path):
    run = runcast.init(
        "sdk-tests", "creds", server="http://user:secret@127.0.0.1:9", token="t", spool_dir=tmp_path,
        capture_code=False, finish_timeout=0.1, flush_interval=0.05,
    )
    assert run.url == f"http://127.0.0.1:9/runs/{run.id}"
    run.finish()
    [path] = find_spools(tmp_path)
    assert b"secret" not in (path / "meta.json").read_bytes()


def test_an_unwritable_spool_drops_counted_and_logged(make_run, tmp_path, caplog):
    blocker = tmp_path / "not-a-dir"
    blocker.write_text("")
    with caplog.at_level(logging.ERROR, logger="runcast"):
        run = make_run(server=f"http://127.0.0.1:{free_port()}", spool_dir=blocker / "spool", finish_timeout=0.5)
        run.log({"a": 1.0})
        run.flush()
        run.log({"a": 2.0})
        run.finish()
    # every event is counted as dropped: run_started, two points, finished, and any heartbeat that
    # reported the hole while the run was open (how many depends on when the sender woke)
    assert run.stats.dropped == run.stats.logged >= 4 and run.stats.spooled == 0
    assert sum("cannot write the spool" in r.getMessage() for r in caplog.records) == 1


def test_a_finish_past_its_timeout_names_the_count_and_the_command_and_tells_the_server(
        make_run, receiver, tmp_path, caplog):
    receiver.mode, receiver.delay = "slow", 0.3  # a busy server: every batch takes 0.3 s
    run = make_run(batch_size=500, max_queue=1000, system_metrics=False)
    for step in range(20_000):
        run.log({"loss": 1.0 / (step + 1)}, step=step)
    with caplog.at_level(logging.WARNING, logger="runcast"):
        run.finish(timeout=1.0)
    [message] = [r.getMessage() for r in caplog.records if "could not send everything" in r.getMessage()]
    [path] = find_spools(tmp_path / "spool")
    unsent = int(re.search(r"within 1 s: ([\d,]+) events are kept on disk in ", message)[1].replace(",", ""))
    stored = {e["seq"] for e in receiver.events()}
    # run_started + 20,000 + finished; a batch whose answer came too late is both stored and kept
    assert 0 < 20_002 - len(stored) <= unsent <= 20_002 - len(stored) + 500
    # the token was given to init(), not in the environment: the command says where it goes
    assert message.endswith(f"Send them with: RUNCAST_TOKEN=<the token given to init> runcast sync {path}")
    assert receiver.spool_reports == [(f"/api/v1/runs/{run.id}/segments/{run.segment}/spool", {"events": unsent})]

    receiver.mode = "ok"
    result = CliRunner().invoke(app, ["sync", str(path), "--token", "tok-123", "-q"])
    assert result.exit_code == 0, result.output
    assert _metrics_steps(receiver, run.segment) == list(range(20_000))
    assert receiver.of_type("finished") and not path.exists()
    assert receiver.spool_reports[-1][1] == {"events": 0}


def test_sync_keeps_batches_under_the_servers_body_limit(tmp_path):
    spool, _segment = _spool_of(tmp_path, 20_000, 5000)  # lines of ~0.6 MB
    server = Receiver().start()
    server.whoami = {"project": "p", "max_batch_events": 5000, "max_body_bytes": 100_000}
    server.max_bytes = 100_000
    try:
        result = CliRunner().invoke(app, ["sync", str(spool.path), "--server", server.url, "--token", "t", "-q"])
        assert result.exit_code == 0, result.output
        assert [e["step"] for e in server.of_type("metrics")] == list(range(20_000))
        assert max(len(events.dumps_batch(b["events"])) for b in server.bodies) <= 100_000
    finally:
        server.stop()


def test_a_live_batch_larger_than_the_server_takes_is_halved_never_dropped(make_run, receiver):
    receiver.max_bytes = 50_000  # the server takes less than it said (or a proxy in front of it)
    run = make_run(flush_interval=0.5, system_metrics=False)
    for step in range(3000):
        run.log({"loss": 1.0 / (step + 1), "lr": 3e-4}, step=step)
    run.finish(timeout=30)
    assert run.stats.dropped == 0
    assert _metrics_steps(receiver, run.segment) == list(range(3000))


def test_an_offline_run_with_a_server_set_says_offline_not_no_server(make_run, receiver, monkeypatch, caplog):
    monkeypatch.setenv("RUNCAST_SERVER", receiver.url)
    with caplog.at_level(logging.WARNING, logger="runcast"):
        run = make_run(server=None, mode="offline")
        run.log({"a": 1.0})
        run.finish()
    said = " ".join(r.getMessage() for r in caplog.records)
    assert "recorded offline" in said and "no server configured" not in said
    assert receiver.bodies == []
