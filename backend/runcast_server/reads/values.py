"""Metric values on the way out: NULL means NaN, non-finite floats become strings."""

from __future__ import annotations

import math
from typing import Any

from runcast.wire.events import encode_value


def stored_value(value: float | None) -> float | str:
    """A stored point value (``points.value`` / ``rollups.last``) in wire form; NULL is NaN."""
    return "NaN" if value is None else encode_value(value)


def aggregate_value(value: float | None) -> float | str | None:
    """An aggregate (min/max/mean) in wire form; NULL stays null (no value to aggregate)."""
    return value if value is None or math.isfinite(value) else encode_value(value)


def strict_json(obj: Any) -> Any:
    """``obj`` with every non-finite float replaced by its wire string, recursively."""
    if isinstance(obj, float) and not math.isfinite(obj):
        return encode_value(obj)
    if isinstance(obj, dict):
        return {k: strict_json(v) for k, v in obj.items()}
    if isinstance(obj, list):
        return [strict_json(v) for v in obj]
    return obj
