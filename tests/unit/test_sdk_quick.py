"""Quick by default: the sender sends when idle and batches while busy; retries spread by full jitter."""

from __future__ import annotations

import random
import statistics

import pytest
from runcast.sender.backoff import Backoff


def metric_bodies(receiver) -> list[list[int]]:
    return [[e["step"] for e in b["events"] if e["type"] == "metrics"] for b in receiver.bodies]


def test_a_lone_point_leaves_at_once_and_points_gather_while_a_request_is_in_flight(make_run, receiver):
    run = make_run(flush_interval=0.0, heartbeat_interval=3600)
    assert run.flush(timeout=10)  # run_started
    receiver.mode, receiver.delay = "slow", 0.5
    run.log({"a": 0.0}, step=0)  # the sender is idle: this point leaves alone, at once
    receiver.wait_for(lambda: receiver.requests == 2)  # its request is in flight (0.5 s)
    for step in range(1, 51):
        run.log({"a": float(step)}, step=step)
    receiver.mode = "ok"
    assert run.flush(timeout=10)
    assert [s for s in metric_bodies(receiver) if s] == [[0], list(range(1, 51))]
    run.finish()


def test_a_positive_flush_interval_still_gathers_until_it_passes_or_the_batch_is_full(make_run, receiver):
    run = make_run(flush_interval=30.0, batch_size=4, heartbeat_interval=3600)
    for step in range(6):
        run.log({"a": float(step)}, step=step)
    receiver.wait_for(lambda: len(receiver.bodies) == 1)
    assert len(receiver.bodies[0]["events"]) == 4  # run_started + 3 points: full, nothing else sent
    run.finish()
    assert [e["step"] for e in receiver.of_type("metrics")] == list(range(6))


def test_flush_interval_must_not_be_negative(make_run):
    with pytest.raises(ValueError, match="flush_interval"):
        make_run(flush_interval=-1.0)


def test_backoff_draws_each_wait_uniformly_below_a_doubling_cap():
    draws = random.Random(7)
    backoff = Backoff(0.5, 30.0, random.Random(7))
    waits = [backoff.next() for _ in range(10)]
    caps = [min(30.0, 0.5 * 2**n) for n in range(10)]
    assert waits == [draws.uniform(0.0, cap) for cap in caps]  # the same seed gives the same waits
    assert all(0.0 <= w <= cap for w, cap in zip(waits, caps, strict=True))
    backoff.reset()
    assert backoff.next() <= 0.5  # a new outage starts small again


def test_a_retry_after_hint_is_waited_out_then_jittered():
    backoff = Backoff(1.0, 30.0, random.Random(3))
    waits = [backoff.next(hint=5.0) for _ in range(5)]
    assert all(5.0 <= w <= 5.0 + min(30.0, 2.0**n) for n, w in enumerate(waits))
    assert len(set(waits)) == 5
    assert 30.0 <= Backoff(1.0, 30.0, random.Random(3)).next(hint=3600.0) <= 31.0  # a hint never beyond the cap


def test_trainers_cut_off_together_do_not_come_back_together():
    """200 trainers lose the server at the same moment: their retries spread over the whole window."""
    firsts, fifths = [], []
    for seed in range(200):
        backoff = Backoff(0.5, 30.0, random.Random(seed))
        waits = [backoff.next() for _ in range(5)]
        firsts.append(waits[0])
        fifths.append(sum(waits))  # when each makes its fifth attempt
    assert len({round(w, 6) for w in firsts}) == 200
    # without jitter every trainer would retry at exactly 0.5, 1.5, 3.5, 7.5, 15.5 s
    assert min(fifths) < 4.0 and max(fifths) > 11.0 and statistics.pstdev(fifths) > 1.5
    in_window = [sum(1 for t in fifths if lo <= t < lo + 1.0) for lo in range(16)]
    assert max(in_window) < 200 * 0.25  # no one-second window holds a quarter of them


def test_send_slots_keep_the_average_gap_and_a_late_send_does_not_delay_the_later_ones():
    from runcast.sender.slots import MIN_SEND_GAP as GAP
    from runcast.sender.slots import SendSlots

    slots = SendSlots()
    assert slots.wait(100.0) == 0.0  # idle: the first send goes at once
    slots.take(100.0)
    assert slots.wait(100.0) == 0.0  # and one more may follow it (a point logged while it was in flight)
    slots.take(100.0)
    assert slots.wait(100.0) == pytest.approx(GAP)  # then the gap holds: two sends per gap at most, on average one
    # A trainer logging once per gap: points at 200.00, 200.05, ...; the send of the first is 40 ms late.
    slots = SendSlots()
    slots.take(200.04)
    for k in range(1, 50):
        logged = 200.0 + k * GAP
        assert slots.wait(logged) == 0.0, k  # every later point leaves when logged: no lag carried on
        slots.take(logged)
    # Over any stretch, no more sends than one per gap, plus the one early send.
    slots, sends, now = SendSlots(), 0, 300.0
    while now < 301.0:
        if slots.wait(now) == 0.0:
            slots.take(now)
            sends += 1
        now += 0.001
    assert sends <= 1.0 / GAP + 2
