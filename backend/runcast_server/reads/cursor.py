"""Pagination cursors, each with the pattern the OpenAPI document states (FastAPI checks it, so
whatever matches the pattern is a cursor these functions can read).

* ``NEXT_ID``: a page that ends at an id (``/events``, ``/alerts``) continues after it: 1..18
  digits (no id comes near 10**18).
* ``RUN_CURSOR``: the run list's, ``<created_at>_<run id>`` of a page's last run (newest
  first). ``created_at`` is written as Python writes the float (``repr``: it reads back
  exactly); the server's clock puts it in [1e-4, 1e16), where that is fixed-point.
"""

from __future__ import annotations

from typing import Final

from runcast.events import ID_RE

NEXT_ID: Final = r"^[0-9]{1,18}$"
RUN_CURSOR: Final = rf"^[0-9]{{1,16}}\.[0-9]{{1,20}}_{ID_RE.pattern.removeprefix('^')}"


def encode_cursor(created_at: float, run_id: str) -> str:
    """The cursor after the run created at ``created_at`` with id ``run_id``."""
    return f"{created_at!r}_{run_id}"


def decode_cursor(cursor: str) -> tuple[float, str]:
    """``(created_at, run id)`` of a cursor that matches ``RUN_CURSOR``."""
    created_at, run_id = cursor.split("_", 1)
    return float(created_at), run_id
