"""The sender thread: batching, ordering, finishing, drops, rejections, ranks, heartbeats."""

from __future__ import annotations

import logging
import time

import pytest
import runcast
from runcast.wire import events


def test_batches_by_count(make_run, receiver):
    run = make_run(batch_size=5, flush_interval=30.0)
    for step in range(9):
        run.log({"loss": float(step)})
    receiver.wait_for(lambda: len(receiver.bodies) == 2)
    assert [len(b["events"]) for b in receiver.bodies] == [5, 5]
    run.finish()
    assert [len(b["events"]) for b in receiver.bodies] == [5, 5, 1]


def test_a_server_that_does_not_name_its_largest_batch_gets_batches_of_1000(make_run, receiver):
    """The receiver has no whoami (like a server before it named its largest batch): the SDK's default
    batch_size (20,000) is cut to what every server takes."""
    run = make_run(flush_interval=30.0, max_queue=5000)
    assert run._sender.config.batch_size == events.COMPATIBLE_BATCH_EVENTS == 1000
    for step in range(2500):
        run.log({"loss": float(step)})
    receiver.wait_for(lambda: len(receiver.bodies) == 2)
    run.finish()
    assert [len(b["events"]) for b in receiver.bodies] == [1000, 1000, 502]  # run_started, 2500 steps, finished


def test_batches_by_time(make_run, receiver):
    run = make_run(batch_size=500, flush_interval=0.2)
    run.log({"a": 1.0})
    run.log({"a": 2.0})
    receiver.wait_for(lambda: len(receiver.bodies) == 1)
    assert [e["type"] for e in receiver.bodies[0]["events"]] == ["run_started", "metrics", "metrics"]
    run.log({"a": 3.0})
    receiver.wait_for(lambda: len(receiver.bodies) == 2)
    assert len(receiver.bodies[1]["events"]) == 1


def test_order_and_seq_across_many_batches(make_run, receiver):
    run = make_run(batch_size=7)
    for step in range(200):
        run.log({"loss": step / 10, "lr": 1e-3}, step=step)
    run.finish()
    events_ = receiver.events()
    assert [e["seq"] for e in events_] == list(range(202))
    assert [e["step"] for e in events_[1:-1]] == list(range(200))
    assert all(len(b["events"]) <= 7 for b in receiver.bodies)
    assert events_[-1]["type"] == "finished" and events_[-1]["step"] == 199
    for body in receiver.bodies:
        events.validate_batch(body)  # the backend's own schema accepts every batch
    assert run.stats == runcast.RunStats(logged=202, sent=202, spooled=0, dropped=0, replayed=0, queued=0)


def test_large_events_are_split_under_the_byte_limit(make_run, receiver):
    run = make_run(flush_interval=30.0)
    blob = "x" * (900 * 1024)
    for version in range(12):  # ~10.8 MB in all: more than one batch may hold
        run.manifest({"blob": blob}, version=f"v{version}")
    run.finish()
    sizes = [len(events.dumps_batch(b["events"])) for b in receiver.bodies]
    assert len(sizes) >= 2 and max(sizes) <= events.MAX_BATCH_BYTES
    assert [e["version"] for e in receiver.of_type("manifest")] == [f"v{i}" for i in range(12)]


def test_flush_waits_for_delivery(make_run, receiver):
    run = make_run(flush_interval=30.0)
    run.log({"a": 1.0})
    assert run.flush(timeout=5.0) is True
    assert len(receiver.of_type("metrics")) == 1


def test_rejected_batches_are_dropped_and_logged_once(make_run, receiver, caplog):
    receiver.mode = "reject"
    run = make_run(batch_size=2)
    with caplog.at_level(logging.ERROR, logger="runcast"):
        for step in range(6):
            run.log({"a": float(step)})
        run.flush()
    errors = [r for r in caplog.records if r.levelno == logging.ERROR]
    assert len(errors) == 1 and "bad event" in errors[0].getMessage()
    assert run.stats.dropped == 7 and run.stats.sent == 0 and run.stats.spooled == 0
    receiver.mode = "ok"
    run.log({"a": 9.0})
    run.finish()
    assert [m["step"] for m in receiver.of_type("metrics")] == [6]


def test_finish_is_idempotent_and_later_calls_are_ignored(make_run, receiver, caplog):
    run = make_run()
    run.log({"a": 1.0})
    run.finish(status="failed")
    run.finish()
    with caplog.at_level(logging.WARNING, logger="runcast"):
        run.log({"a": 2.0})
        run.note("after the end")
    assert [e["status"] for e in receiver.of_type("finished")] == ["failed"]
    assert len(receiver.of_type("metrics")) == 1
    assert sum("finished" in r.getMessage() for r in caplog.records) == 1


def test_finish_timeout_spools_what_a_slow_service_did_not_take(make_run, receiver, caplog, tmp_path):
    receiver.mode, receiver.delay = "slow", 5.0
    run = make_run(flush_interval=30.0)
    run.log({"a": 1.0})
    started = time.monotonic()
    with caplog.at_level(logging.WARNING, logger="runcast"):
        run.finish(timeout=0.3)
    assert time.monotonic() - started < 3.0  # bounded by the timeout, not by the 5 s server
    spools = list((tmp_path / "spool").iterdir())
    assert len(spools) == 1 and (spools[0] / "batches.jsonl").stat().st_size > 0
    assert any(f"runcast sync {spools[0]}" in r.getMessage() for r in caplog.records)
    assert run.stats.spooled == 3


def test_context_manager_sets_status(make_run, receiver):
    with make_run(name="ok") as run:
        run.log({"a": 1.0})
    with pytest.raises(RuntimeError):
        with make_run(name="boom") as run:
            raise RuntimeError("boom")
    with pytest.raises(KeyboardInterrupt):
        with make_run(name="ctrl-c") as run:
            raise KeyboardInterrupt
    assert [e["status"] for e in receiver.of_type("finished")] == ["finished", "failed", "killed"]


def test_other_ranks_are_cheap_no_ops(make_run, receiver, monkeypatch, tmp_path):
    monkeypatch.setenv("RANK", "3")
    run = make_run()
    assert run.rank == 3 and not run.enabled
    run.log({"a": 1.0})
    run.checkpoint(__file__, step=1)
    with pytest.raises(ValueError):
        run.log({"": 1.0})  # still validated
    run.log({"a": 1.0}, step=0)  # the step rule applies here too: left out, never raised
    assert run.stats.ignored == 1
    run.finish()
    assert run.stats.logged == 0 and receiver.requests == 0
    assert not (tmp_path / "spool").exists()
    everyone = make_run(all_ranks=True)
    everyone.finish()
    [started] = receiver.of_type("run_started")
    assert started["env"]["rank"] == 3


def test_rank_argument_wins_over_env(make_run, receiver, monkeypatch):
    monkeypatch.setenv("RANK", "0")
    assert not make_run(rank=1).enabled


def test_heartbeats_while_open(make_run, receiver):
    run = make_run(heartbeat_interval=0.05)
    run.log({"a": 1.0}, step=4)
    receiver.wait_for(lambda: len(receiver.of_type("heartbeat")) >= 2)
    run.finish()
    beats = receiver.of_type("heartbeat")
    assert beats[-1]["step"] == 4
    assert receiver.events()[-1]["type"] == "finished"


def test_env_server_and_token(receiver, monkeypatch, tmp_path):
    monkeypatch.setenv("RUNCAST_SERVER", receiver.url)
    monkeypatch.setenv("RUNCAST_TOKEN", "from-env")
    monkeypatch.delenv("RANK", raising=False)
    run = runcast.init("sdk-tests", "env", spool_dir=tmp_path, capture_code=False, flush_interval=0.05)
    run.finish()
    assert receiver.auth[0] == "Bearer from-env" and len(receiver.events()) == 2


def test_log_cost_sanity(make_run, receiver):
    # A smoke version of bench/sdk_log_cost.py: no timing assertion, only that the
    # hot path takes every call and everything arrives.
    run = make_run(batch_size=500)
    values = {f"m{i}": float(i) for i in range(8)}
    started = time.perf_counter()
    for step in range(5000):
        run.log(values, step=step)
    per_call_us = (time.perf_counter() - started) / 5000 * 1e6
    run.finish()
    assert len(receiver.of_type("metrics")) == 5000
    print(f"log(): {per_call_us:.1f} us per call of 8 scalars")


def test_transport_may_be_an_http_url(make_run, receiver):
    run = make_run(server=None, transport=receiver.url)
    run.log({"a": 1.0})
    run.finish()
    assert run.url == f"{receiver.url}/runs/{run.id}"
    assert [e["type"] for e in receiver.events()] == ["run_started", "metrics", "finished"]


def test_the_senders_state_is_one_object_through_an_outage(make_run, receiver, caplog):
    """What the sender changes as it runs lives in ``run._sender.state`` (a SenderState): spooling
    during an outage, the outage warned about once, cleared when the spool is replayed."""
    from runcast.sender.state import SenderState

    run = make_run(retry_initial=0.05, retry_max=0.1)
    state = run._sender.state
    assert isinstance(state, SenderState) and not state.spooling
    receiver.mode = "fail"
    with caplog.at_level(logging.WARNING, logger="runcast"):
        for step in range(3):
            run.log({"loss": float(step)}, step=step)
            run.flush(timeout=5)
    assert state.spooling and state.spooled_events >= 1 and "outage" in state.told
    assert sum("cannot reach" in r.getMessage() for r in caplog.records) == 1
    receiver.mode = "ok"
    receiver.wait_for(lambda: not state.spooling)
    assert state.spooled_events == 0 and "outage" not in state.told
    run.finish()
    assert [e["step"] for e in receiver.of_type("metrics")] == [0, 1, 2]
