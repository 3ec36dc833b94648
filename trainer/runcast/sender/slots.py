"""The live sender's pace with ``flush_interval`` 0: sends ``MIN_SEND_GAP`` apart on average."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final

MIN_SEND_GAP: Final = 0.05  # a busy trainer makes 20 requests a second on average (each costs the server a batch)


@dataclass
class SendSlots:
    """Send slots ``MIN_SEND_GAP`` apart; a send may take its slot up to one gap early.

    A late send (a slow request held the sender) moves the next slot from when this one was
    due, not from when it went: spacing each send from the last actual one kept a trainer
    logging once per gap late by the same amount for the rest of the run (up to a whole gap)."""

    next_slot: float = float("-inf")

    def wait(self, now: float) -> float:
        """Seconds until a send may go (0: now)."""
        return max(0.0, self.next_slot - MIN_SEND_GAP - now)

    def take(self, now: float) -> None:
        """A send went at ``now``."""
        self.next_slot = max(self.next_slot, now) + MIN_SEND_GAP
