"""Export of a run's samples or evaluations as JSONL or Parquet (``GET /runs/{id}/export?what=``), streamed.

Rows in step order (then in the order stored), every field whole, scores and metrics as the wire
has them (JSONL: NaN as ``"NaN"``; Parquet: a map of doubles). Each page is one keyset query in a
short session of its own, as the metrics export reads its points: memory stays that of a page and
no read transaction is held open for the whole download.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import Any, Final, Literal

from sqlalchemy import and_, or_, select
from sqlalchemy.orm import Session

from runcast_server.core.db import Database
from runcast_server.core.errors import NotFound
from runcast_server.outputs.access import due
from runcast_server.outputs.models import Evaluation, Sample
from runcast_server.policy.apply import View
from runcast_server.record.models import Segment

OutputKind = Literal["samples", "evals"]
OutputFormat = Literal["jsonl", "parquet"]
# The columns of each export, in order (the Parquet schema's too).
COLUMNS: Final[dict[str, tuple[str, ...]]] = {
    "samples": ("segment", "step", "key", "prompt_id", "prompt", "output", "reference", "scores", "settings"),
    "evals": ("segment", "step", "checkpoint", "suite", "task", "metrics", "n", "config", "versions"),
}
# Rows per page: a sample may hold 384 Ki characters of text, an evaluation 68 KiB of JSON.
PAGE_ROWS: Final[dict[str, int]] = {"samples": 100, "evals": 1000}
_MODEL: Final[dict[str, type[Sample] | type[Evaluation]]] = {"samples": Sample, "evals": Evaluation}


@dataclass(frozen=True)
class OutputExport:
    """What one reader exports of one run: ``upto`` bounds the versions (a delayed reader's)."""

    run_id: str
    what: OutputKind
    key: str | None = None  # samples of this key only
    upto: int | None = None


def export_for(session: Session, run_id: str, what: OutputKind, view: View, key: str | None) -> OutputExport | None:
    """The export a reader may have; None when the policy withholds the kind from them (nothing to
    export). A ``key`` no due sample of the run holds is ``NotFound``, as an unknown metric is."""
    if not view.output_shown(what):
        if key is not None:
            raise NotFound(f"sample key {key!r}", field="key")
        return None
    if key is not None and session.scalar(
        select(Sample.id).where(Sample.run_id == run_id, Sample.key == key, *due(view, Sample)).limit(1)
    ) is None:
        raise NotFound(f"sample key {key!r}", field="key")
    return OutputExport(run_id, what, key, None if view.horizon is None else view.horizon.version)


def pages(database: Database, export: OutputExport, page_rows: int | None = None) -> Iterator[list[dict[str, Any]]]:
    """The export's rows, as dicts of ``COLUMNS``, a page per list."""
    model = _MODEL[export.what]
    names = COLUMNS[export.what]
    size = page_rows or PAGE_ROWS[export.what]
    columns = [getattr(model, n) for n in names if n != "segment"]
    after: tuple[int, int] | None = None
    while True:
        conditions = [model.run_id == export.run_id]
        if export.upto is not None:
            conditions.append(model.version <= export.upto)
        if export.key is not None:
            conditions.append(Sample.key == export.key)
        if after is not None:
            conditions.append(or_(model.step > after[0], and_(model.step == after[0], model.id > after[1])))
        with database.scope() as session:
            rows = session.execute(
                select(model.id, Segment.index, *columns).join(Segment, Segment.id == model.segment_id)
                .where(*conditions).order_by(model.step, model.id).limit(size)
            ).all()
        if not rows:
            return
        yield [dict(zip(names, row[1:])) for row in rows]
        if len(rows) < size:
            return
        after = (rows[-1][2], rows[-1][0])


def jsonl_chunks(rows: Iterable[list[dict[str, Any]]]) -> Iterator[bytes]:
    """One JSON object per line, a chunk per page of ``pages``."""
    for page in rows:
        yield "".join(json.dumps(row, ensure_ascii=False, allow_nan=False, separators=(",", ":")) + "\n"
                      for row in page).encode()


def filename(run_id: str, what: OutputKind, fmt: OutputFormat) -> str:
    return f"runcast-{run_id}-{what}.{fmt}"
