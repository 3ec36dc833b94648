"""The ingest inbox as Prometheus gauges, read from the database at scrape time: exact across every
process and host. The app hands the collector to ``/metrics`` at start (``observability.http.scrape_registry``)."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterator

from prometheus_client.core import GaugeMetricFamily
from prometheus_client.registry import Collector
from sqlalchemy import Engine, func, select

from runcast_server.inbox.models import InboxRow
from runcast_server.inbox.rows import PENDING, STATES

log = logging.getLogger(__name__)


class InboxCollector(Collector):
    """``runcast_inbox_batches{state}`` and the age of the oldest pending batch: one
    ``COUNT ... GROUP BY state`` (on the table's state index) and one ``MIN`` per scrape."""

    def __init__(self, engine: Callable[[], Engine]) -> None:
        self.engine = engine

    def describe(self) -> list[GaugeMetricFamily]:
        return []  # registering must not query the database

    def collect(self) -> Iterator[GaugeMetricFamily]:
        by_state = GaugeMetricFamily("runcast_inbox_batches", "Ingest inbox rows by state.", labels=["state"])
        oldest = GaugeMetricFamily(
            "runcast_inbox_oldest_pending_age_seconds", "Age of the oldest batch accepted and not stored yet (0: none).")
        up = GaugeMetricFamily("runcast_inbox_scrape_ok", "1 when the inbox could be read for this scrape.")
        try:
            with self.engine().connect() as conn:
                counts = dict(conn.execute(select(InboxRow.state, func.count()).group_by(InboxRow.state)).all())
                first = conn.execute(select(func.min(InboxRow.received_at)).where(InboxRow.state == PENDING)).scalar()
        except Exception:
            log.warning("metrics: could not read the ingest inbox", exc_info=True)
            up.add_metric([], 0)
            yield up
            return
        for state in STATES:
            by_state.add_metric([state], counts.get(state, 0))
        oldest.add_metric([], max(0.0, time.time() - first) if first is not None else 0.0)
        up.add_metric([], 1)
        yield from (by_state, oldest, up)
