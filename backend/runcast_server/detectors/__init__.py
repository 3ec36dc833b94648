"""Anomaly detectors run on ingest: loss spike, non-finite values, grad-norm explosion,
plateau, divergence, throughput drop, restart loop and stall. See docs/alerts.md.

The pure, incremental detectors (no database) have a module per family (``excursion``,
``nonfinite``, ``plateau``, ``divergence``, ``throughput``, ``runlevel``) over ``stats``
and ``signals``; ``core`` wires them to metric roles and runs them; ``config`` holds the documented
parameters and per-run overrides. They touch no database: ``alerts.engine.detect_batch``
feeds them a stored batch after its commit, in a transaction of its own, and stores their
state and alerts.
"""

from runcast_server.detectors.config import (
    DEFAULTS,
    ConfigError,
    effective,
    validate_overrides,
)
from runcast_server.detectors.core import SegmentRunner
from runcast_server.detectors.signals import Signal

__all__ = ["DEFAULTS", "ConfigError", "SegmentRunner", "Signal", "effective", "validate_overrides"]
