"""Samples, evals and media as the live stream carries them: enough for a page to fetch what it shows.

Each run version names the rows it stored (``run_versions.outputs``, by table); the stream's
batch message carries them under the same names, one entry per row, read here by id.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any, Final

from sqlalchemy import select
from sqlalchemy.orm import InstrumentedAttribute, Session

from runcast_server.outputs.models import Evaluation, Media, Sample
from runcast_server.record.models import Segment

# Table (= policy kind = message field) -> its model and the columns an entry carries besides id,
# segment and step.
_ENTRY: Final[dict[str, tuple[Any, tuple[str, ...]]]] = {
    "samples": (Sample, ("key", "prompt_id")),
    "evals": (Evaluation, ("suite", "task", "checkpoint")),
    "media": (Media, ("key", "kind")),
}
KINDS: Final = tuple(_ENTRY)


def stream_entries(session: Session, logged: Iterable[Mapping[str, list[int]] | None]) -> dict[str, dict[int, dict[str, Any]]]:
    """Table -> id -> entry (``{"id", "segment", "step", ...}``) of every row the log rows name."""
    wanted: dict[str, set[int]] = {}
    for outputs in logged:
        for table, listed in (outputs or {}).items():
            wanted.setdefault(table, set()).update(listed)
    out: dict[str, dict[int, dict[str, Any]]] = {}
    for table, ids in sorted(wanted.items()):
        model, names = _ENTRY[table]
        columns: list[InstrumentedAttribute[Any]] = [getattr(model, name) for name in names]
        rows = session.execute(
            select(model.id, Segment.index, model.step, *columns).join(Segment, Segment.id == model.segment_id)
            .where(model.id.in_(sorted(ids)))
        ).all()
        out[table] = {row[0]: {"id": row[0], "segment": row[1], "step": row[2], **dict(zip(names, row[3:]))}
                      for row in rows}
    return out
