"""The sender's pipeline (``runcast.sender.ahead``): a backlog's next batch is encoded while one is in
flight; delivery stays in order, and nothing drawn from the queue is lost when a delivery fails."""

from __future__ import annotations

import threading
import time
from collections import deque

import pytest
import runcast
from runcast.sender.ahead import pipelined


def test_batches_are_delivered_in_order_with_the_last_items_in_the_final_one() -> None:
    queue = deque(range(10))
    delivered: list[tuple[list[int], str]] = []
    pipelined(queue, [4, 4, 1], ["beat"], lambda items: f"encoded {items}",  # type: ignore[arg-type]
              lambda items, encoded: delivered.append((items, encoded)))
    assert delivered == [([0, 1, 2, 3], "encoded [0, 1, 2, 3]"), ([4, 5, 6, 7], "encoded [4, 5, 6, 7]"),
                         ([8, "beat"], "encoded [8, 'beat']")]
    assert list(queue) == [9]  # what arrived after the pass began waits for the next one


def test_the_next_batch_is_encoded_while_one_is_delivered() -> None:
    queue = deque(range(6))
    encoding = {i: threading.Event() for i in range(3)}
    order: list[str] = []

    def encode(items: list[int]) -> int:
        encoding[items[0] // 2].set()
        return items[0] // 2

    def deliver(items: list[int], batch: int) -> None:
        if batch < 2:  # the batch after this one is being encoded before this delivery returns
            assert encoding[batch + 1].wait(5.0)
        order.append(f"delivered {batch}")

    pipelined(queue, [2, 2, 2], [], encode, deliver)
    assert order == ["delivered 0", "delivered 1", "delivered 2"]


def test_a_failed_delivery_puts_the_batch_drawn_ahead_back_at_the_front_in_order() -> None:
    queue = deque(range(10))

    def deliver(items: list[int], encoded: None) -> None:
        if items[0] == 3:
            raise RuntimeError("a bug in delivery")

    with pytest.raises(RuntimeError, match="a bug in delivery"):
        pipelined(queue, [3, 3, 3], [], lambda items: None, deliver)
    assert list(queue) == [6, 7, 8, 9]  # batch [3, 4, 5] went with the error; [6, 7, 8] is back in front


def test_an_encoding_error_reaches_the_sender_after_the_batch_before_was_delivered() -> None:
    queue = deque(range(4))
    delivered: list[list[int]] = []

    def encode(items: list[int]) -> list[int]:
        if items[0] == 2:
            raise ValueError("unencodable")
        return items

    with pytest.raises(ValueError, match="unencodable"):
        pipelined(queue, [2, 2], [], encode, lambda items, encoded: delivered.append(encoded))
    assert delivered == [[0, 1]]


def test_a_backlog_through_an_outage_arrives_once_in_order(make_run, receiver) -> None:
    """Many batches queued behind a slow service that then fails for a while: pipelined batches spool in
    order with the one in flight, the spool is replayed, and every event arrives once, in order."""
    receiver.mode, receiver.delay = "slow", 0.02
    run = make_run(batch_size=50, retry_initial=0.05, retry_max=0.2)
    for step in range(3000):
        run.log({"loss": step / 7, "lr": 1e-3}, step=step)

    def outage() -> None:
        receiver.wait_for(lambda: len(receiver.bodies) >= 5)
        receiver.mode = "fail"
        time.sleep(0.5)
        receiver.mode = "ok"

    breaker = threading.Thread(target=outage)
    breaker.start()
    run.finish(timeout=60)
    breaker.join()
    seqs = [e["seq"] for e in receiver.events()]
    assert seqs == list(range(3002))
    assert run.stats == runcast.RunStats(logged=3002, sent=3002, spooled=run.stats.spooled, dropped=0,
                                         replayed=run.stats.replayed, queued=0)
    assert run.stats.spooled > 0 and run.stats.replayed == run.stats.spooled
