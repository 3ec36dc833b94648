"""Response models of the samples, evals and media reads (docs/samples.md, docs/api.md).

Numbers in ``scores`` and ``metrics`` are wire values: NaN and +-Inf as the strings ``"NaN"``,
``"Infinity"``, ``"-Infinity"``. ``withheld``: the run's publication policy withholds the kind
from this reader (the lists are then empty).
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from runcast_server.reads.schemas import Value

PROMPT_CLIP = 500  # characters of a prompt in the prompt list
TEXT_CLIP = 2000  # characters of an output (and a reference) in the sample list

_CURSOR = "Pass as ?after= for the next page; null on the last page."


class _Answer(BaseModel):
    model_config = ConfigDict(extra="forbid")


class PromptSummary(_Answer):
    """One prompt of a sample key: how often and over which steps the run wrote for it."""

    key: str
    prompt_id: str
    prompt: str = Field(description=f"The prompt's first {PROMPT_CLIP} characters (of its first sample).")
    prompt_chars: int = Field(description="The prompt's whole length in characters.")
    count: int
    first_step: int
    last_step: int


class PromptList(_Answer):
    prompts: list[PromptSummary]
    withheld: bool


class SampleItem(_Answer):
    """A sample in a list: its output (and reference) clipped, with their whole lengths."""

    id: int
    segment: int
    step: int
    key: str
    prompt_id: str
    output: str = Field(description=f"The output's first {TEXT_CLIP} characters.")
    output_chars: int
    reference: str | None = Field(description=f"The reference's first {TEXT_CLIP} characters; null if none.")
    reference_chars: int | None
    scores: dict[str, Value] | None
    settings: dict[str, Any] | None


class SampleList(_Answer):
    samples: list[SampleItem]
    next_cursor: str | None = Field(description=_CURSOR)
    withheld: bool


class SampleDetail(_Answer):
    """One sample whole: its prompt, output and reference."""

    id: int
    segment: int
    step: int
    key: str
    prompt_id: str
    prompt: str
    output: str
    reference: str | None
    scores: dict[str, Value] | None
    settings: dict[str, Any] | None


class EvalEntry(_Answer):
    """One task's scores from one suite at a step (``checkpoint``: the checkpoint's step it is tied to)."""

    id: int
    segment: int
    step: int
    checkpoint: int | None
    suite: str
    task: str
    metrics: dict[str, Value]
    n: int | None


class EvalList(_Answer):
    evals: list[EvalEntry]
    withheld: bool


class MediaKey(_Answer):
    """One media key (of one kind) and the steps it was logged at."""

    key: str
    kind: Literal["image", "table", "histogram"]
    count: int
    first_step: int
    last_step: int


class MediaKeys(_Answer):
    keys: list[MediaKey]
    withheld: bool


class _MediaItem(_Answer):
    id: int
    segment: int
    step: int
    key: str
    caption: str | None


class ImageItem(_MediaItem):
    """An image: its bytes at ``image_url`` (``?w=`` for a thumbnail)."""

    kind: Literal["image"]
    image_url: str
    blob: str = Field(description="The SHA-256 of the image's bytes.")
    content_type: Literal["image/png", "image/jpeg"]
    width: int
    height: int
    size: int


class TableItem(_MediaItem):
    kind: Literal["table"]
    columns: list[str]
    rows: list[list[str | int | float | bool | None]]


class HistogramItem(_MediaItem):
    """Bins between ``edges`` (one more edge than counts), and the values that fell in none."""

    kind: Literal["histogram"]
    edges: list[float]
    counts: list[float]
    nan: float | None
    inf: float | None
    neg_inf: float | None


MediaItem = Annotated[ImageItem | TableItem | HistogramItem, Field(discriminator="kind")]


class MediaList(_Answer):
    media: list[MediaItem]
    next_cursor: str | None = Field(description=_CURSOR)
    withheld: bool
