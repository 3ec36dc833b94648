"""Pipelined shipping: the next batch is encoded on a helper thread while the sender waits for the
service's answer to the one before (the service stores a batch before it answers)."""

from __future__ import annotations

import threading
from collections import deque
from collections.abc import Callable
from typing import Generic, TypeVar

A = TypeVar("A")
R = TypeVar("R")
T = TypeVar("T")


def pipelined(queue: deque[T], sizes: list[int], last: list[T], encode: Callable[[list[T]], R],
              deliver: Callable[[list[T], R], None]) -> None:
    """Ship batches of ``sizes[i]`` items from the front of ``queue`` (``last`` after the final one's):
    ``deliver(items, encode(items))`` for each, in order, on this thread, while the next batch is drawn
    and encoded on a helper thread. When a delivery raises, the batch drawn ahead of it goes back to the
    front of the queue, in order (not lost with it), and the error goes on."""

    def draw(i: int) -> list[T]:
        items = [queue.popleft() for _ in range(sizes[i])]
        return items + last if i == len(sizes) - 1 else items

    if not sizes:
        return
    items = draw(0)
    encoded = encode(items)
    for i in range(1, len(sizes) + 1):
        following = draw(i) if i < len(sizes) else None
        ahead = None if following is None else Ahead(encode, following)
        try:
            deliver(items, encoded)
        except BaseException:
            if following is not None:
                queue.extendleft(reversed(following))
            raise
        if ahead is not None and following is not None:
            items, encoded = following, ahead.result()


def fetched_ahead(fetch: Callable[[A], tuple[R, A] | None], start: A, pages: int, ship: Callable[[R], None],
                  go_on: Callable[[], bool]) -> None:
    """Up to ``pages`` pages, each ``fetch(cursor)``: the page and the cursor after it, or None when there
    is nothing more. ``ship(page)`` runs for each in order, on this thread, while the next is fetched on a
    helper thread; ``go_on()`` is asked before each. A fetch that raises raises here, after the pages
    before it were shipped."""
    got = fetch(start)
    for i in range(pages):
        if got is None or not go_on():
            return
        page, cursor = got
        ahead = Ahead(fetch, cursor) if i + 1 < pages else None
        ship(page)
        if ahead is None:
            return
        got = ahead.result()


class Ahead(Generic[A, R]):
    """``fn(arg)`` computed on a daemon thread from now; ``result()`` waits for it and returns it (or raises
    what it raised). Daemon: an encoding still running never holds the training process at exit."""

    def __init__(self, fn: Callable[[A], R], arg: A) -> None:
        self._fn, self._arg = fn, arg
        self._value: R | None = None
        self._error: BaseException | None = None
        self._thread = threading.Thread(target=self._run, name="runcast-encode", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        try:
            self._value = self._fn(self._arg)
        except BaseException as exc:  # noqa: BLE001 - handed to the caller of result()
            self._error = exc

    def result(self) -> R:
        self._thread.join()
        if self._error is not None:
            raise self._error
        return self._value  # type: ignore[return-value]
