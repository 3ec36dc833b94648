"""The sender's pipeline (``runcast.sender.ahead``): a backlog's next batch is encoded while one is in
flight; delivery stays in order, and nothing drawn from the queue is lost when a delivery fails. The
overflow file's batches are read and encoded ahead the same way (``fetched_ahead``)."""

from __future__ import annotations

import threading
import time
from collections import deque

import pytest
import runcast
from runcast.sender import overflow
from runcast.sender.ahead import fetched_ahead, pipelined


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

    finish_through_an_outage(run, receiver, after_bodies=5)
    seqs = [e["seq"] for e in receiver.events()]
    assert seqs == list(range(3002))
    assert run.stats == runcast.RunStats(logged=3002, sent=3002, spooled=run.stats.spooled, dropped=0,
                                         replayed=run.stats.replayed, queued=0)
    assert run.stats.spooled > 0 and run.stats.replayed == run.stats.spooled


def test_pages_are_fetched_ahead_while_one_is_shipped_and_shipped_in_order() -> None:
    fetching = {i: threading.Event() for i in range(5)}
    shipped: list[int] = []

    def fetch(at: int) -> tuple[int, int] | None:
        if at == 4:
            return None
        fetching[at].set()
        return at, at + 1

    def ship(page: int) -> None:
        if page < 3:  # the page after this one is fetched before this one is shipped
            assert fetching[page + 1].wait(5.0)
        shipped.append(page)

    fetched_ahead(fetch, 0, 10, ship, lambda: True)
    assert shipped == [0, 1, 2, 3]
    shipped.clear()
    fetched_ahead(fetch, 0, 2, ship, lambda: True)  # at most ``pages``
    assert shipped == [0, 1]
    shipped.clear()
    fetched_ahead(fetch, 0, 10, ship, lambda: len(shipped) < 3)  # until go_on() says no
    assert shipped == [0, 1, 2]


def test_a_fetch_that_raises_reaches_the_shipper_after_the_page_before_was_shipped() -> None:
    shipped: list[int] = []

    def fetch(at: int) -> tuple[int, int]:
        if at == 2:
            raise ValueError("unreadable")
        return at, at + 1

    with pytest.raises(ValueError, match="unreadable"):
        fetched_ahead(fetch, 0, 10, shipped.append, lambda: True)
    assert shipped == [0, 1]


def test_an_overflow_file_is_read_ahead_of_what_was_shipped_and_an_old_episodes_cursor_reads_nothing(tmp_path) -> None:
    file = overflow.Overflow(tmp_path)
    file.open()
    for seq in range(5):
        file.put((seq, "metrics", 0.0, seq, {"a": float(seq)}))
    first, used = file.read(file.cursor(), 2)
    assert [r[0] for r in first] == [0, 1]
    ahead = file.cursor().after(len(first), used)
    second, used2 = file.read(ahead, 2)  # before the first two are marked shipped
    assert [r[0] for r in second] == [2, 3]
    file.mark_shipped(len(first), used)
    assert file.cursor() == ahead
    assert [r[0] for r in file.read(ahead.after(len(second), used2), 10)[0]] == [4]
    assert not file.try_close()  # three records are not shipped yet
    file.mark_shipped(3, used2 + file.read(ahead.after(2, used2), 10)[1])
    stale = file.cursor()
    assert file.try_close()
    file.open()  # the next episode, from the start of a new file
    for seq in range(5, 13):  # more records than the ended episode had
        file.put((seq, "metrics", 0.0, seq, {"a": float(seq)}))
    assert file.read(stale, 10) == ([], 0)  # a cursor of the ended episode
    assert [r[0] for r in file.read(file.cursor(), 10)[0]] == list(range(5, 13))


def test_a_spilled_burst_through_a_slow_service_and_an_outage_arrives_once_in_order(make_run, receiver) -> None:
    """A burst far beyond the queue goes to the overflow file; shipped from it, read and encoded ahead,
    behind a slow service that then fails for a while: every event arrives once, in order."""
    receiver.mode, receiver.delay = "slow", 0.02
    run = make_run(max_queue=100, batch_size=50, retry_initial=0.05, retry_max=0.2)
    for step in range(3000):
        run.log({"loss": step / 7, "lr": 1e-3}, step=step)
    assert run.stats.spilled > 2000

    finish_through_an_outage(run, receiver, after_bodies=10)
    seqs = [e["seq"] for e in receiver.events()]
    assert seqs == list(range(3002))
    assert run.stats.sent == 3002 and run.stats.dropped == 0
    assert run.stats.spooled > 0 and run.stats.replayed == run.stats.spooled


def finish_through_an_outage(run, receiver, *, after_bodies: int) -> None:  # type: ignore[no-untyped-def]
    """``run.finish()`` while the receiver fails for 0.5 s once it has taken ``after_bodies`` bodies."""

    def outage() -> None:
        receiver.wait_for(lambda: len(receiver.bodies) >= after_bodies)
        receiver.mode = "fail"
        time.sleep(0.5)
        receiver.mode = "ok"

    breaker = threading.Thread(target=outage)
    breaker.start()
    run.finish(timeout=60)
    breaker.join()


def test_a_first_batch_of_many_points_is_cut_at_the_first_of_its_equal_parts() -> None:
    """A pass's first batch of more than ``SEND_POINTS`` points leaves alone, as soon as it is encoded (its
    size is the first part ``_within_points`` would cut): the service stores it while the rest is encoded."""
    from runcast.sender.batches import SEND_POINTS, batch_sizes

    eight = lambda n: 8 * n  # noqa: E731 - eight keys a step
    assert batch_sizes(12_002, 20_000, False, eight) == [4001, 8001]  # 96,016 points: 3 parts
    assert batch_sizes(45_002, 20_000, False, eight) == [5000, 15_000, 20_000, 5002]  # only a pass's first
    assert batch_sizes(20_000, 20_000, True, eight) == [5000, 15_000]  # the heartbeat joins the last, not full
    assert batch_sizes(SEND_POINTS // 8, 20_000, False, eight) == [SEND_POINTS // 8]  # not over: whole
    assert batch_sizes(45_002, 20_000, False, lambda n: n) == [20_000, 20_000, 5002]  # one key: 20,000 points
    assert batch_sizes(45_002, 20_000, True) == [20_000, 20_000, 5002]  # points not asked: as before
    assert batch_sizes(0, 20_000, True, eight) == [0]
