"""Waiting between retries: capped exponential back-off with full jitter."""

from __future__ import annotations

import random


class Backoff:
    """Capped exponential back-off with full jitter.

    The n-th wait of an outage is drawn uniformly from [0, min(cap, initial * 2**n)]; a
    server's ``Retry-After`` hint is waited out first, then the same draw is added. The
    random source is passed in (a seeded ``random.Random`` makes the waits repeatable).
    """

    def __init__(self, initial: float, cap: float, rng: random.Random) -> None:
        self.initial, self.cap = initial, cap
        self._rng = rng
        self._attempt = 0

    def next(self, hint: float | None = None) -> float:
        """The wait before the next attempt, in seconds."""
        ceiling = min(self.cap, self.initial * 2 ** min(self._attempt, 62))
        self._attempt += 1
        wait = self._rng.uniform(0.0, ceiling)
        return wait if hint is None else min(hint, self.cap) + wait

    def reset(self) -> None:
        """The service answered: the next outage starts from ``initial`` again."""
        self._attempt = 0
