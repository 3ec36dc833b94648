"""Which series make a segment's step: those the training logged, not the system sampler's.

The sampler (``runcast.system``) logs ``system/...`` series whose step is a wall-clock second
(epoch seconds); ingest keeps them out of the run's ``last_step`` (``ingest.state``), and a
segment's ``last_step`` reads only the other series.
"""

from __future__ import annotations

from runcast.wire.events import SYSTEM_PREFIX
from sqlalchemy import ColumnElement

from runcast_server.record.models import Series


def training_series() -> ColumnElement[bool]:
    """The condition on ``series`` rows that leaves the system sampler's out."""
    return ~Series.key.startswith(SYSTEM_PREFIX, autoescape=True)
