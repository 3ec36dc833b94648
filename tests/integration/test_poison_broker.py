"""From the user's seat: poison on the broker beside a live ingest (issue 23, item 2).

A message of the first task contract whose config nests 900 levels used to kill the worker's
main process (Celery pickles the decoded arguments to its pool: RecursionError), go back on
the queue (acks_late) and kill every restart, while another project's acknowledged points
waited. Now every such message is refused before anything decodes it, acknowledged, and
quarantined once; a queue entry that is not a kombu message at all is logged and
dropped; the worker process is the same one at the end, and the healthy run's points are
all stored, each once.

PostgreSQL, Redis, a prefork Celery worker (`runcast worker`), `runcast serve` and the SDK
(in its own process) are real.
"""

from __future__ import annotations

import json
import sys
import time

import pytest
from services import wait_until
from sqlalchemy import text

from integration.helpers import (
    INGEST_TASK,
    Driver,
    celery_client,
    export_rows,
    inbox_states,
    push_raw_task,
    wait_points,
)

pytestmark = pytest.mark.slow

STEPS, METRICS = 250, 4  # 1,000 points
TAIL = b', {"callbacks": null, "errbacks": null, "chain": null, "chord": null}]'


def deep(levels: int) -> dict:
    config: dict = {}
    for _ in range(levels):
        config = {"a": config}
    return config


def legacy_event(config: bytes) -> bytes:
    return (b'{"v": 1, "type": "run_started", "run": "poisonrun01", "segment": "poisonseg01", "seq": 0, "ts": 1.0, '
            b'"project": "attacker", "name": "poison", "config": ' + config + b"}")


def raw_poison(redis_client) -> dict[str, str]:  # type: ignore[no-untyped-def]
    """Messages no kombu producer sends, pushed as its Redis transport would: id -> what."""
    nested = b'{"a":' * 100_000 + b"1" + b"}" * 100_000
    cases = {
        "100000 levels": (b'[[], {"events": [' + legacy_event(nested) + b'], "token": "rc_x"}' + TAIL, {}),
        "kwargs a list": (b"[[], [1, 2]" + TAIL, {}),
        "not [args, kwargs, options]": (b'{"contract": 2, "inbox_id": 1}', {}),
        "40 MB": (b'[[], {"contract": 2, "inbox_id": 1, "pad": "' + b"x" * (40 << 20) + b'"}' + TAIL, {}),
        "not JSON": (b"\x00garbage{", {}),
        "pickle": (b"\x80\x04K\x01.", {"content_type": "application/x-python-serialize"}),
        "900-level header": (b'[[], {"contract": 2, "inbox_id": 1}' + TAIL,
                             {"headers": '"x": ' + json.dumps(deep(900))}),
    }
    return {push_raw_task(redis_client, body, **opts): what for what, (body, opts) in cases.items()}


def garbage_entries(redis_client) -> int:  # type: ignore[no-untyped-def]
    """Queue entries that are not kombu messages at all; returns how many."""
    entries = [
        "not a message",
        '{"body": "' + "x" * 9 + '", "headers": {"task": "runcast.ingest_batch", "id": "bad-base64"}, '
        '"content-type": "application/json", "properties": {"body_encoding": "base64", "delivery_tag": "t", '
        '"delivery_info": {"exchange": "", "routing_key": "celery"}}}',
        '{"headers": ' + '{"a": ' * 100_000 + "1" + "}" * 100_000 + ', "properties": {}}',
        "[1, 2, 3]",
    ]
    for entry in entries:
        redis_client.lpush("celery", entry)
    return len(entries)


def send_deep_legacy_message(redis_url: str, token: str) -> str:
    """The reported message: contract 1 (the events in the message), a config 900 levels deep,
    sent by a kombu producer as the previous release's API did."""
    limit = sys.getrecursionlimit()
    sys.setrecursionlimit(10_000)  # the sender's JSON encoder recurses too
    try:
        event = json.loads(legacy_event(b"{}"))
        event["config"] = deep(900)
        result = celery_client(redis_url).send_task(INGEST_TASK, kwargs={"events": [event], "project_id": None,
                                                                         "token": token})
    finally:
        sys.setrecursionlimit(limit)
    return str(result.id)


def test_poison_on_the_broker_is_quarantined_once_while_another_project_is_stored_exactly(stack):
    worker = stack.start_worker(concurrency=2, pool="prefork")
    stack.start_api()
    api = stack.api_url
    driver = Driver(stack, server=api, token=stack.token("healthy"), project="healthy", steps=STEPS,
                    metrics=METRICS, extra=["--sleep", "0.004", "--batch-size", "50"])
    run_id = driver.run_id  # the run has started: its batches are on the broker from now on
    redis_client = stack.redis.client()
    poison = {send_deep_legacy_message(stack.redis_url, stack.token("attacker")): "900 levels, contract 1"}
    poison.update(raw_poison(redis_client))
    garbage = garbage_entries(redis_client)
    foreign = str(celery_client(stack.redis_url).send_task(INGEST_TASK, kwargs={"contract": 3, "inbox_id": 1}).id)

    driver.wait()
    wait_points(stack.engine, run_id, STEPS * METRICS, timeout=120, procs=[worker])
    rows = export_rows(api, run_id)
    assert len(rows) == STEPS * METRICS
    assert {(r["key"], r["step"]) for r in rows} == {(f"m{k}", s) for k in range(METRICS) for s in range(STEPS)}

    # Each poison message is one quarantined inbox row that names it; nothing else was stored for it.
    wait_until(lambda: inbox_states(stack.engine).get("quarantined") == len(poison), 60,
               f"{len(poison)} quarantined rows")
    with stack.engine.connect() as conn:
        errors = [e for (e,) in conn.execute(text(
            "SELECT error FROM ingest_inbox WHERE state = 'quarantined' ORDER BY id"))]
        attacker_runs = conn.execute(text(
            "SELECT count(*) FROM runs r JOIN projects p ON p.id = r.project_id WHERE p.name = 'attacker'")).scalar()
    assert attacker_runs == 0
    for message_id, what in poison.items():
        assert sum(f"unreadable broker message {message_id} " in e for e in errors) == 1, (what, errors)
    listed = stack.cli("quarantine", "list").stdout
    assert f"quarantined {len(poison)}" in listed

    # Nothing went back on the queue; the worker's main process is the one that started.
    time.sleep(3)
    assert redis_client.llen("celery") == 0 and redis_client.hlen("unacked") == 0
    worker.check_alive("after the poison")
    log = worker.output()
    assert "Unrecoverable error" not in log and "Traceback" not in log and "Restoring" not in log
    assert log.count("broker: refused message") == len(poison)
    assert log.count("broker: dropped an entry of the queue") == garbage
    assert "contract 3 (this worker speaks 2)" in log and foreign not in "".join(errors)


KILLER = '''
import os

import runcast_server.tasks as _tasks

_store_row = _tasks.store_row


def _store_or_die(ctx, inbox_id, **kwargs):
    if inbox_id == int(os.environ["RUNCAST_TEST_KILLER_INBOX_ID"]):
        os._exit(9)  # the pool process dies as if killed (out of memory, a crash in C)
    return _store_row(ctx, inbox_id, **kwargs)


_tasks.store_row = _store_or_die
'''


def test_a_message_whose_pool_process_dies_is_not_put_back_to_kill_the_next(stack, tmp_path):
    """reject_on_worker_lost is off for ingest: the message is acknowledged once its process is
    lost (WorkerLostError, once), the worker goes on with the other project's batches, and the
    batch waits in the inbox (pending) for the sweeper."""
    import os

    folder = tmp_path / "killer"
    folder.mkdir()
    (folder / "sitecustomize.py").write_text(KILLER)
    stack.start_api()
    stack.token("doomed")
    with stack.engine.begin() as conn:
        project_id = conn.execute(text("SELECT id FROM projects WHERE name = 'doomed'")).scalar_one()
        inbox_id = conn.execute(text(
            "INSERT INTO ingest_inbox (project_id, state, body, events, received_at, next_sweep_at, sweeps, attempts) "
            "VALUES (:p, 'pending', :b, 0, :t, :t + 3600, 0, 0) RETURNING id"),
            {"p": project_id, "b": b'{"v": 1, "events": []}', "t": time.time()}).scalar_one()
    worker = stack.start_worker(concurrency=2, pool="prefork", RUNCAST_TEST_KILLER_INBOX_ID=str(inbox_id),
                                PYTHONPATH=os.pathsep.join([str(folder), os.environ.get("PYTHONPATH", "")]))
    celery_client(stack.redis_url).send_task(INGEST_TASK, kwargs={"contract": 2, "inbox_id": inbox_id})
    driver = Driver(stack, server=stack.api_url, token=stack.token("healthy"), project="healthy", steps=STEPS,
                    metrics=METRICS, extra=["--sleep", "0.004", "--batch-size", "50"])
    driver.wait()
    wait_points(stack.engine, driver.run_id, STEPS * METRICS, timeout=120, procs=[worker])
    assert len(export_rows(stack.api_url, driver.run_id)) == STEPS * METRICS

    time.sleep(5)  # time enough for a re-queued message to come back and kill again
    worker.check_alive("after its pool process died")
    log = worker.output()
    assert log.count("exited with 'exitcode 9'") == 1, log  # killed once, not once per redelivery
    assert log.count("Task handler raised error: WorkerLostError") == 1
    redis_client = stack.redis.client()
    assert redis_client.llen("celery") == 0 and redis_client.hlen("unacked") == 0
    assert inbox_states(stack.engine).get("pending") == 1  # the sweeper's to enqueue again
