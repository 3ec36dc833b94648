"""Report bodies and answers of the API (docs/reports.md)."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, Field

from runcast_server.comments.schemas import Author

MAX_BODY = 100_000
MAX_STEP = 2**62


class TrainingReportIn(BaseModel):
    """A new report, or a new version of one (every field given: the version is whole)."""

    title: str = Field(min_length=1, max_length=200)
    body: str = Field(min_length=1, max_length=MAX_BODY, description="Markdown with live blocks (docs/reports.md).")
    from_step: int = Field(ge=0, le=MAX_STEP, description="The first step the report covers.")
    to_step: int = Field(ge=0, le=MAX_STEP, description="The last step the report covers (not below from_step).")


class PublishIn(BaseModel):
    version: int | None = Field(default=None, ge=1, le=2**31 - 1, description="The version to publish; default: the newest.")


class TrainingReportOut(BaseModel):
    """One version of a report as its reader may see it: the public gets the published version only."""

    run: str
    number: int
    url: str = Field(description="The report's page.")
    state: Literal["draft", "published"]
    version: int = Field(description="The version shown here.")
    latest_version: int | None = Field(description="The newest version (the team only; else null).")
    published_version: int | None
    title: str
    body: str | None = Field(description="The Markdown source (the team only; else null).")
    html: str = Field(description="Sanitized HTML; each live block an empty div.runcast-block with data-* attributes.")
    blocks: list[dict[str, Any]] = Field(description="The live blocks, in order: kind, keys, from, to, step.")
    from_step: int
    to_step: int
    author: Author | None = Field(description="null: written with a team token.")
    created_at: float = Field(description="When this version was written.")
    published_at: float | None


class ReportSummary(BaseModel):
    number: int
    url: str
    title: str
    state: Literal["draft", "published"]
    from_step: int
    to_step: int
    published_at: float | None


class TrainingReportList(BaseModel):
    run: str
    team: bool = Field(description="The caller writes this run's reports (drafts are listed too).")
    reports: list[ReportSummary]


class ReportData(BaseModel):
    run: str
    number: int
    version: int
    blocks: list[dict[str, Any]] = Field(description="Each live block with its data under the reader's policy.")


class ReportPreviewIn(BaseModel):
    """Markdown to render as a report would be, unsaved (the editor's live preview)."""

    body: str = Field(min_length=1, max_length=MAX_BODY, description="Markdown with live blocks (docs/reports.md).")


class ReportPreviewOut(BaseModel):
    run: str
    html: str = Field(description="Sanitized HTML, as a saved report's: each live block an empty div.runcast-block.")
    blocks: list[dict[str, Any]] = Field(description="Each live block with its data, as the public reads the "
                                         "published report (the run's publication policy applied).")


class DraftOut(BaseModel):
    run: str
    from_step: int
    to_step: int
    audience: Literal["public", "team"]
    body: str = Field(description="The generated Markdown.")


class ReportVersionOut(BaseModel):
    version: int
    title: str
    from_step: int
    to_step: int
    author: Author | None
    created_at: float


class ReportVersionList(BaseModel):
    run: str
    number: int
    versions: list[ReportVersionOut]
