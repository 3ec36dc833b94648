"""``PATCH /runs/{run_id}`` (rename, tag, annotate, archive), ``DELETE /runs/{run_id}`` and ``PUT
/runs/{run_id}/segments/{segment}/spool`` (the trainer's spool report): the run's project's token only.

Another project's token, like an unknown run id, gets 404 and changes nothing.
"""

from __future__ import annotations

import time
from typing import Annotated, Any, Final

from fastapi import APIRouter, Path
from pydantic import BaseModel, ConfigDict, Field, field_validator
from runcast.wire.events import ID_RE, MAX_NAME_CHARS, MAX_NOTE_CHARS, MAX_STEP, MAX_TAG_CHARS, MAX_TAGS, check_text
from runcast.wire.limits import CONTROL_RE, NOT_BLANK, WHITESPACE

from runcast_server import tables
from runcast_server.alerts.service import stall_after
from runcast_server.api.deps import IngestDep, SessionDep, TeamDep
from runcast_server.api.read_deps import SettingsDep
from runcast_server.core.errors import NotFound, error_responses
from runcast_server.reads.schemas import RunSummary
from runcast_server.record.models import Run
from runcast_server.runs import manage
from runcast_server.runs import queries as reads

router = APIRouter(tags=["runs"])
WRITE_ERRORS = error_responses(401, 404, 422)
RunIdPath = Annotated[str, Path(description="The run id.", max_length=64)]
SegmentIdPath = Annotated[str, Path(description="The segment id the SDK made (one init() of the run).", max_length=64)]

_CONTROL = CONTROL_RE.pattern.strip("[]")
# Not blank and no control character; a lone surrogate, which no pattern can name, is check_text's.
TAG_PATTERN: Final = rf"^[^{_CONTROL}]*[^{WHITESPACE}{_CONTROL}][^{_CONTROL}]*$"
# A tag to add follows the SDK's rule (runcast.wire.checks.check_tags): no comma either.
NEW_TAG_PATTERN: Final = rf"^[^{_CONTROL},]*[^{WHITESPACE}{_CONTROL},][^{_CONTROL},]*$"

Tag = Annotated[str, Field(min_length=1, max_length=MAX_TAG_CHARS, pattern=TAG_PATTERN)]
NewTag = Annotated[str, Field(min_length=1, max_length=MAX_TAG_CHARS, pattern=NEW_TAG_PATTERN)]


class TagChange(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)  # 0 is not False, "1" not a list
    add: list[NewTag] = Field(default_factory=list, max_length=MAX_TAGS)
    remove: list[Tag] = Field(default_factory=list, max_length=MAX_TAGS)  # any tag a run may hold from before

    @field_validator("add", "remove")
    @classmethod
    def _tags(cls, values: list[str]) -> list[str]:
        return [check_text(v, "tags").strip() for v in values]


class RunChange(BaseModel):
    """What to change; a field left out stays as it is."""

    model_config = ConfigDict(extra="forbid", strict=True)  # 0 is not False, "1" not a list
    name: str | None = Field(None, min_length=1, max_length=MAX_NAME_CHARS, pattern=NOT_BLANK,
                             description="The new display name (not blank).")
    tags: TagChange | None = Field(None, description="Tags to add, then tags to remove.")
    archived: bool | None = Field(None, description="Archive (left out of the run list by default) or restore.")
    notes: str | None = Field(None, max_length=MAX_NOTE_CHARS, description="The run's notes (as init(notes=...)); "
                              "an empty string clears them.")

    @field_validator("name")
    @classmethod
    def _name(cls, value: str | None) -> str | None:
        return None if value is None else check_text(value, "name")

    @field_validator("notes")
    @classmethod
    def _notes(cls, value: str | None) -> str | None:
        return None if value is None else check_text(value, "notes")


class DeletedRun(BaseModel):
    run: str
    deleted: bool = True
    points: int
    series: int
    segments: int
    events: int


class SpoolReport(BaseModel):
    """What the trainer's spool holds of one segment."""

    model_config = ConfigDict(extra="forbid", strict=True)
    # 2^53 - 1: a bound a JSON number states exactly (2^63 - 1 becomes 2^63 as a float in the document)
    events: int = Field(ge=0, le=MAX_STEP, description="Events of the segment waiting in the local spool; 0: none.")


class SpoolState(BaseModel):
    run: str
    segment: int = Field(description="The segment's index in the run.")
    spooled_events: int
    spooled_at: float


def _owned(session: Any, run_id: str, project: Any) -> Run:
    if not ID_RE.match(run_id):
        raise NotFound("run", field="run")
    return manage.owned_run(session, run_id, project)


@router.patch("/runs/{run_id}", response_model=RunSummary, responses=WRITE_ERRORS)
def change_run(
    session: SessionDep, settings: SettingsDep, project: TeamDep, run_id: RunIdPath, body: RunChange
) -> RunSummary:
    """Rename, tag, annotate, archive or restore a run (a token of the run's project)."""
    run = _owned(session, run_id, project)
    if body.name is not None:
        run.name = body.name
    if body.tags is not None:
        manage.retag(session, run, body.tags.add, body.tags.remove)
    if body.archived is not None:
        manage.set_archived(run, body.archived)
    if body.notes is not None:
        run.notes = body.notes or None
    session.flush()
    tags = reads.run_tags(session, [run.id]).get(run.id, [])
    after = stall_after(session, run.id, settings.stall_after_s)
    return reads.summarize(run, project.name, stall_after_s=after, now=time.time(), tags=tags)


@router.delete("/runs/{run_id}", response_model=DeletedRun, responses=WRITE_ERRORS)
def delete_run(session: SessionDep, project: TeamDep, run_id: RunIdPath) -> DeletedRun:
    """Delete a run and everything stored for it: points, rollups, timeline (checkpoint,
    revision and manifest records), alerts, subscriptions to it. Cannot be undone."""
    run = _owned(session, run_id, project)
    done = tables.delete_run(session, run)
    session.commit()  # the run is gone and its partitions detached; dropping them holds no lock of the parents
    manage.drop_detached(session)
    return DeletedRun(run=done.run, points=done.points, series=done.series, segments=done.segments, events=done.events)


@router.put("/runs/{run_id}/segments/{segment}/spool", response_model=SpoolState, responses=WRITE_ERRORS)
def report_spool(
    session: SessionDep, project: IngestDep, run_id: RunIdPath, segment: SegmentIdPath, body: SpoolReport
) -> SpoolState:
    """Say how many of a segment's events wait in the trainer's local spool (``finish()`` when its
    timeout leaves events on disk; ``runcast sync`` after sending them). The run's page and API show
    it until a later report says 0."""
    run = _owned(session, run_id, project)
    if not ID_RE.match(segment):
        raise NotFound("segment", field="segment")
    row = manage.report_spool(session, run, segment, body.events, time.time())
    return SpoolState(run=run.id, segment=row.index, spooled_events=row.spooled_events, spooled_at=row.spooled_at or 0.0)
