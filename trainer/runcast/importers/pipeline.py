"""An import from end to end, before sending: read every source, then plan every run.

Everything is read and checked before the first event is sent, so a bad file (or a
bad run in a good file) sends nothing.
"""

from __future__ import annotations

import time
from collections.abc import Sequence

from runcast.importers.model import ImportFailed, SourceRun
from runcast.importers.plan import Plan, Target, clean_name, plan_run
from runcast.importers.registry import ReadOptions, read


def read_all(sources: Sequence[str], fmt: str | None = None, options: ReadOptions | None = None) -> list[SourceRun]:
    """The runs of every source, in order; ImportFailed at the first source that cannot be read."""
    options = options or ReadOptions()
    runs: list[SourceRun] = []
    for source in sources:
        found = read(source, fmt, options)
        if not found or not any(run.points or run.outputs for run in found):
            raise ImportFailed(source, "no metric points to import")
        runs.extend(found)
    return runs


def plan_all(runs: Sequence[SourceRun], target: Target, *, name: str | None = None, now: float | None = None) -> list[Plan]:
    """One plan per run. ``name`` names a single run, or prefixes several (``NAME:<source name>``)."""
    now = time.time() if now is None else now
    plans = []
    for run in runs:
        label = run.name if name is None else (name if len(runs) == 1 else f"{name}:{run.name}")
        plans.append(plan_run(run, target, name=clean_name(label, fallback=f"imported {run.format} run"), now=now))
    return plans
