"""Pagination cursors, each with the pattern the OpenAPI document states (FastAPI checks it, so
whatever matches the pattern is a cursor these functions can read).

* ``NEXT_ID``: a page that ends at an id (``/events``, ``/alerts``) continues after it: 1..18
  digits (no id comes near 10**18).
* ``STEP_CURSOR``: a page in step order (samples, media) continues after ``<step>_<id>`` of its
  last row: steps below 2**53 (16 digits), ids of 1..18 digits.
* ``RUN_CURSOR``: the run list's, ``<created_at>_<run id>`` of a page's last run (newest
  first). ``created_at`` is written as Python writes the float (``repr``: it reads back
  exactly); the server's clock puts it in [1e-4, 1e16), where that is fixed-point.
"""

from __future__ import annotations

from typing import Final

from runcast.wire.events import ID_RE

NEXT_ID: Final = r"^[0-9]{1,18}$"
STEP_CURSOR: Final = r"^[0-9]{1,16}_[0-9]{1,18}$"
RUN_CURSOR: Final = rf"^[0-9]{{1,16}}\.[0-9]{{1,20}}_{ID_RE.pattern.removeprefix('^')}"


def encode_cursor(created_at: float, run_id: str) -> str:
    """The cursor after the run created at ``created_at`` with id ``run_id``."""
    return f"{created_at!r}_{run_id}"


def decode_cursor(cursor: str) -> tuple[float, str]:
    """``(created_at, run id)`` of a cursor that matches ``RUN_CURSOR``."""
    created_at, run_id = cursor.split("_", 1)
    return float(created_at), run_id


def encode_step_cursor(step: int, row_id: int) -> str:
    """The cursor after the row ``row_id`` at ``step``."""
    return f"{step}_{row_id}"


def decode_step_cursor(cursor: str) -> tuple[int, int]:
    """``(step, id)`` of a cursor that matches ``STEP_CURSOR``."""
    step, row_id = cursor.split("_", 1)
    return int(step), int(row_id)
