"""The data of a report's live blocks as one reader may see it: what the report page draws and
refreshes, and what a static export carries inline."""

from __future__ import annotations

from typing import Any

from sqlalchemy.orm import Session

from runcast_server.policy.apply import View
from runcast_server.record.models import Run
from runcast_server.reports import record
from runcast_server.reports.blocks import Block
from runcast_server.reports.record import Period


def block_data(session: Session, run: Run, view: View, block: Block) -> dict[str, Any]:
    """One block's data: ``series`` (chart), ``rows`` (samples, evals, changes) or ``checkpoint``."""
    period = Period(block.start, block.end)
    out: dict[str, Any] = block.as_dict()
    if block.kind == "chart":
        series = {k: record.points(session, run, view, k, period) for k in block.keys}
        out["series"] = {k: v for k, v in series.items() if v is not None}  # a withheld key is absent
    elif block.kind == "samples":
        out["rows"] = [{"step": s.step, "key": s.key, "prompt": s.prompt, "output": s.output}
                       for s in record.samples(session, run, view, period)]
    elif block.kind == "evals":
        out["rows"] = [{"step": e.step, "suite": e.suite, "task": e.task, "metrics": e.metrics}
                       for e in record.evaluations(session, run, view, period)]
    elif block.kind == "changes":
        out["rows"] = [{"step": c.step, "kind": c.kind, "text": c.text}
                       for c in record.changes(session, run, view, period)]
    else:
        found = record.checkpoints(session, run, view, Period(block.step, block.step))
        out["checkpoint"] = None if not found else {
            "step": found[-1].step, "size": found[-1].size, "sha256": found[-1].sha256,
            "metrics": view.by_key(found[-1].metrics)}
    return out


def report_data(session: Session, run: Run, view: View, blocks: list[Block]) -> list[dict[str, Any]]:
    return [block_data(session, run, view, b) for b in blocks]
