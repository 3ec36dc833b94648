"""Reading a run's samples: its prompts, their outputs across steps, and one sample whole.

Lists clip long text in the query (``substr``), so a page of outputs costs what it shows, and
give the whole length beside it (``length``: characters on both databases).
"""

from __future__ import annotations

from typing import Any

from sqlalchemy import and_, func, or_, select
from sqlalchemy.orm import Session

from runcast_server.core.errors import NotFound
from runcast_server.outputs.access import due, output_visible
from runcast_server.outputs.models import Sample
from runcast_server.outputs.schemas import PROMPT_CLIP, TEXT_CLIP
from runcast_server.policy.apply import View
from runcast_server.reads.cursor import encode_step_cursor
from runcast_server.record.models import Run, Segment


def list_prompts(session: Session, run: Run, view: View, key: str | None) -> dict[str, Any]:
    """The run's prompts (of one key, if given) in the order the run first wrote for them."""
    if not view.output_shown("samples"):
        return {"prompts": [], "withheld": True}
    s = Sample
    conditions = [s.run_id == run.id, *due(view, s), *([s.key == key] if key is not None else [])]
    groups = session.execute(
        select(s.key, s.prompt_id, func.count(), func.min(s.step), func.max(s.step), func.min(s.id))
        .where(*conditions).group_by(s.key, s.prompt_id)
    ).all()
    first_ids = [g[5] for g in groups]
    texts = {
        row_id: (prompt, chars)
        for row_id, prompt, chars in session.execute(
            select(s.id, func.substr(s.prompt, 1, PROMPT_CLIP), func.length(s.prompt)).where(s.id.in_(first_ids))
        )
    }
    prompts = [
        {"key": key_, "prompt_id": pid, "prompt": texts[first][0], "prompt_chars": texts[first][1], "count": count,
         "first_step": lo, "last_step": hi}
        for key_, pid, count, lo, hi, first in sorted(groups, key=lambda g: (g[0], g[5]))
    ]
    return {"prompts": prompts, "withheld": False}


def list_samples(
    session: Session, run: Run, view: View, *, key: str | None, prompt: str | None, after: tuple[int, int] | None,
    limit: int,
) -> dict[str, Any]:
    """Samples oldest step first (then in the order stored), outputs and references clipped."""
    if not view.output_shown("samples"):
        return {"samples": [], "next_cursor": None, "withheld": True}
    s = Sample
    conditions = [s.run_id == run.id, *due(view, s)]
    if key is not None:
        conditions.append(s.key == key)
    if prompt is not None:
        conditions.append(s.prompt_id == prompt)
    if after is not None:
        conditions.append(or_(s.step > after[0], and_(s.step == after[0], s.id > after[1])))
    rows = session.execute(
        select(s.id, Segment.index, s.step, s.key, s.prompt_id, func.substr(s.output, 1, TEXT_CLIP),
               func.length(s.output), func.substr(s.reference, 1, TEXT_CLIP), func.length(s.reference), s.scores,
               s.settings)
        .join(Segment, Segment.id == s.segment_id)
        .where(*conditions).order_by(s.step, s.id).limit(limit + 1)
    ).all()
    page = rows[:limit]
    samples = [
        {"id": r[0], "segment": r[1], "step": r[2], "key": r[3], "prompt_id": r[4], "output": r[5],
         "output_chars": r[6], "reference": r[7], "reference_chars": r[8], "scores": r[9], "settings": r[10]}
        for r in page
    ]
    cursor = encode_step_cursor(page[-1][2], page[-1][0]) if len(rows) > limit else None
    return {"samples": samples, "next_cursor": cursor, "withheld": False}


def one_sample(session: Session, run: Run, view: View, sample_id: int) -> dict[str, Any]:
    """One sample whole; ``NotFound`` (as an unknown id) for one the reader may not see."""
    found = session.execute(
        select(Sample, Segment.index).join(Segment, Segment.id == Sample.segment_id)
        .where(Sample.id == sample_id, Sample.run_id == run.id)
    ).first()
    if found is None or not output_visible(view, found[0]):
        raise NotFound("sample", field="sample_id")
    row, index = found
    return {"id": row.id, "segment": index, "step": row.step, "key": row.key, "prompt_id": row.prompt_id,
            "prompt": row.prompt, "output": row.output, "reference": row.reference, "scores": row.scores,
            "settings": row.settings}
