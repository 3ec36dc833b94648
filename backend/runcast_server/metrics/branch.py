"""Which points of a resumed run are the abandoned branch (frontend/js/branch.js is the same rule).

A segment that resumes at ``start_step`` N continues from the checkpoint of step N (the state
after step N). So an earlier segment's points at steps > N are abandoned, and its point at N
stays, unless the later segment logged step N itself: then the later value wins.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence


def is_abandoned(segment_starts: Sequence[tuple[int, int]], index: int, step: int,
                 holds: Callable[[int, int], bool]) -> bool:
    """Whether segment ``index``'s point at ``step`` is abandoned.

    ``segment_starts``: (index, start_step) of each segment of the run; ``holds(index, step)``:
    whether that segment has a point at ``step``."""
    return any(later > index and (step > start or (step == start and holds(later, step)))
               for later, start in segment_starts)


def abandoned_from(segment_starts: Sequence[tuple[int, int]], index: int, steps: Sequence[int],
                   holds: Callable[[int, int], bool]) -> int:
    """The position in ``steps`` (ascending) of segment ``index``'s first abandoned point; ``len(steps)`` if none."""
    return next((i for i, step in enumerate(steps) if is_abandoned(segment_starts, index, step, holds)), len(steps))
