"""Robust statistics the detectors share: medians, the MAD, a bounded ring of recent values."""

from __future__ import annotations

from bisect import bisect_left, insort
from typing import Any, Final

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


ORDERED: Final = "_ordered"  # a state's transient key: its ring in order (``ordered``), never stored


def ordered(state: dict[str, Any], ring: list[float]) -> list[float]:
    """``ring``'s values in order, kept in ``state[ORDERED]`` and in step with the ring by ``push_ordered``.

    A moving median over a window of w points is then a binary search and a move per
    point instead of a sort. The copy is made from the ring the first time a batch asks
    for it, and is not stored with the state (``stored_state``).
    """
    copy = state.get(ORDERED)
    if copy is None:
        copy = state[ORDERED] = sorted(ring)
    return copy


def push_ordered(state: dict[str, Any], ring: list[float], value: float, size: int) -> list[float]:
    """``push`` for a ring whose ordered copy (``ordered``) is kept: both updated; returns the copy."""
    copy = ordered(state, ring)
    slide(ring, copy, value, size)
    return copy


def slide(ring: list[float], window: list[float], value: float, size: int) -> None:
    """Append ``value`` to ``ring`` (its last ``size`` values kept) and to ``window``, its values in order."""
    ring.append(value)
    insort(window, value)
    if len(ring) > size:
        if len(ring) == size + 1:  # the usual case: one value leaves
            del window[bisect_left(window, ring[0])]
            del ring[0]
        else:
            for old in ring[: len(ring) - size]:
                del window[bisect_left(window, old)]
            del ring[: len(ring) - size]


def stored_state(state: dict[str, Any]) -> dict[str, Any]:
    """The part of a detector's state that is stored: all but the transient copies."""
    return {k: v for k, v in state.items() if k != ORDERED}
