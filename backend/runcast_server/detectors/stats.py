"""Robust statistics the detectors share: medians, the MAD, a bounded ring of recent values."""

from __future__ import annotations

MAD_SIGMA = 1.4826  # MAD of a normal distribution x this = its standard deviation
MIN_MAD_POINTS = 10


def median(values: list[float]) -> float:
    return middle(sorted(values))


def middle(s: list[float]) -> float:
    """The median of an already sorted list."""
    n = len(s)
    mid = n // 2
    return s[mid] if n % 2 else 0.5 * (s[mid - 1] + s[mid])


def median_mad(values: list[float]) -> tuple[float, float]:
    """Median and median absolute deviation (this runs once per point of every detected series).

    The deviations are taken in sorted order: they then form two monotone runs, which
    ``sorted`` merges in linear time.
    """
    s = sorted(values)
    m = middle(s)
    return m, mad(s, m)


def mad(ordered: list[float], median: float) -> float:
    """The median absolute deviation from ``median`` of an already sorted list."""
    return middle(sorted([abs(v - median) for v in ordered]))


def push(ring: list[float], value: float, size: int) -> None:
    """Append ``value``, keeping the last ``size`` values."""
    ring.append(value)
    if len(ring) > size:
        del ring[: len(ring) - size]
