"""What a reader may see of a run's samples, evals and media: one place for every read of them.

A row is shown to a reader who may read its run (``reads.access``, checked first) when the run's
publication policy shows its kind (``samples``, ``evals``, ``media``; the team sees everything)
and, for a delayed run, once the version that stored it is due (``policy.delay``). Queries add
``due`` to their conditions; a row already read is judged by ``output_visible`` (the image route
asks it of a media row before serving its blob).
"""

from __future__ import annotations

from typing import Final

from sqlalchemy import ColumnElement, and_, or_

from runcast_server.outputs.models import Evaluation, Media, Sample
from runcast_server.policy.apply import View

OutputModel = type[Sample] | type[Evaluation] | type[Media]
# The publication policy's kind of each table.
KIND: Final[dict[OutputModel, str]] = {Sample: "samples", Evaluation: "evals", Media: "media"}


def due(view: View, model: OutputModel) -> list[ColumnElement[bool]]:
    """The conditions that keep a query of ``model`` to the rows the reader's delay has released
    (none for the team, or when nothing is held back): as ``Horizon.events_due`` (a row without a
    version is due once received ``delay_s`` ago). The kind is ``View.output_shown``'s."""
    h = view.horizon
    if h is None:
        return []
    return [or_(model.version <= h.version, and_(model.version.is_(None), model.received_at <= h.until))]


def output_visible(view: View, row: Sample | Evaluation | Media) -> bool:
    """Whether ``view``'s reader may see ``row`` (of a run the reader may read): its kind shown by
    the policy, and its version due under the broadcast delay (as ``due``). The team sees every row."""
    if not view.output_shown(KIND[type(row)]):
        return False
    h = view.horizon
    if h is None:
        return True
    return row.version <= h.version if row.version is not None else row.received_at <= h.until
