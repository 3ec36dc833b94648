"""The ingest body as the OpenAPI document states it: a batch of events, one model per type.

The route reads and checks the body itself with ``runcast.wire.events`` (strict JSON, one error
naming the field and the event's index), not through FastAPI; these models state the same
rules, from the same limits, for the document. What JSON Schema cannot state is left to that
check: sizes in bytes (a metric name's 200, a JSON object's, a table's), the depth of a JSON
object, a lone surrogate in text, an integer written without a fraction (``2.0`` is refused), an
integer past a float's range where a number is due, and rules between two values (a table row's
cells, one per column; a histogram's edges strictly increasing, one count fewer than edges).
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, WithJsonSchema
from runcast.wire.events import (
    CHECKPOINT_STATUSES,
    FINAL_STATUSES,
    ID_RE,
    MAX_BATCH_EVENTS,
    MAX_GROUP_CHARS,
    MAX_INT,
    MAX_JOB_TYPE_CHARS,
    MAX_KEY_BYTES,
    MAX_METRICS_PER_EVENT,
    MAX_MIX_SOURCES,
    MAX_NAME_CHARS,
    MAX_NOTE_CHARS,
    MAX_PATH_CHARS,
    MAX_SEQ,
    MAX_STEP,
    MAX_TAG_CHARS,
    MAX_TAGS,
    MAX_TS,
    MAX_VERSION_CHARS,
    NONFINITE,
    PROJECT_RE,
    SHA256_RE,
    SUMMARIES,
    VISIBILITIES,
    X_AXES,
)
from runcast.wire.limits import (
    COMMAND_ID_RE,
    COMMAND_OUTCOMES,
    CONTROL_RE,
    IMAGE_TYPES,
    MAX_CAPTION_CHARS,
    MAX_COMMAND_MESSAGE_CHARS,
    MAX_EVAL_CONFIG_BYTES,
    MAX_EVAL_METRICS,
    MAX_EVAL_VERSIONS_BYTES,
    MAX_HISTOGRAM_BINS,
    MAX_IMAGE_SIDE,
    MAX_OUTPUT_CHARS,
    MAX_PROMPT_CHARS,
    MAX_PROMPT_ID_CHARS,
    MAX_SAMPLE_SCORES,
    MAX_SAMPLE_SETTINGS_BYTES,
    MAX_SUITE_CHARS,
    MAX_TABLE_BYTES,
    MAX_TABLE_CELL_CHARS,
    MAX_TABLE_COLUMNS,
    MAX_TABLE_ROWS,
    MAX_TASK_CHARS,
    NO_NUL,
    NOT_BLANK,
    TIMESTAMP_KEY,
    WHITESPACE,
)
from typing_extensions import TypeAliasType

from runcast_server.policy.schemas import PolicyChange

_CONTROL = CONTROL_RE.pattern.strip("[]")

Id = Annotated[str, Field(pattern=ID_RE.pattern)]
Step = Annotated[int, Field(ge=0, le=MAX_STEP)]
Count = Annotated[int, Field(ge=0, le=MAX_INT)]
MetricName = Annotated[
    str, Field(min_length=1, max_length=MAX_KEY_BYTES, pattern=rf"^[^{_CONTROL}]+$",
               description=f"At most {MAX_KEY_BYTES} bytes of UTF-8.")
]
# A metric value: a number, or NaN and +-Inf as strings (strict JSON).
WireValue = float | Literal[tuple(NONFINITE)]  # type: ignore[valid-type]  # runcast.wire.events' values, at runtime
Tag = Annotated[
    str, Field(max_length=MAX_TAG_CHARS, pattern=rf"^[^{_CONTROL},]*[^{WHITESPACE}{_CONTROL},][^{_CONTROL},]*$")
]


def _text(max_chars: int, pattern: str = NO_NUL, min_chars: int = 0) -> Any:
    return Annotated[str, Field(min_length=min_chars, max_length=max_chars, pattern=pattern)]


# Any JSON inside a JSON object field: no NUL in text, keys included; integers of 64 bits. One schema
# without a type, each keyword applying to the values of its type, rather than a union of one per
# type: the same values, and client generators (which cannot build a union that names itself) read
# it as any value.
_JSON_VALUE_REF = {"$ref": "#/components/schemas/JsonValue"}
JsonText = Annotated[str, Field(pattern=NO_NUL)]
JsonNumber = Annotated[float, Field(ge=-MAX_INT, le=MAX_INT)]
JsonValue = TypeAliasType("JsonValue", Annotated[Any, WithJsonSchema({
    "description": "Any JSON value: no NUL in text (keys included), numbers within 64-bit integers.",
    "additionalProperties": _JSON_VALUE_REF, "propertyNames": {"pattern": NO_NUL},
    "items": _JSON_VALUE_REF, "pattern": NO_NUL, "minimum": -MAX_INT, "maximum": MAX_INT,
})])
JsonObject = dict[JsonText, JsonValue]


class _Event(BaseModel):
    """Every event's envelope; other fields are ignored."""

    model_config = ConfigDict(extra="allow")
    v: Literal[1] = 1
    run: Id
    segment: Id
    seq: Annotated[int, Field(ge=0, le=MAX_SEQ)]
    ts: Annotated[float, Field(ge=0, le=MAX_TS)]


class RunStartedEvent(_Event):
    """A run (or a resumed segment of it) starts; a resumed segment's values are ignored."""

    type: Literal["run_started"]
    project: Annotated[str, Field(pattern=PROJECT_RE.pattern)]
    name: _text(MAX_NAME_CHARS, rf"^[^{_CONTROL}]+$", 1)  # type: ignore[valid-type]
    config: JsonObject | None = None
    code: JsonObject | None = None
    env: JsonObject | None = None
    seed: Annotated[int, Field(ge=-MAX_INT, le=MAX_INT)] | None = None
    resume_step: Step | None = None
    visibility: Literal[VISIBILITIES] = "public"  # type: ignore[valid-type]
    alerts: JsonObject | None = Field(None, description="Detector overrides; an invalid object is ignored as a whole.")
    public_paths: bool = False
    tags: Annotated[list[Tag], Field(max_length=MAX_TAGS)] | None = None
    group: _text(MAX_GROUP_CHARS) | None = None  # type: ignore[valid-type]
    job_type: _text(MAX_JOB_TYPE_CHARS) | None = None  # type: ignore[valid-type]
    notes: _text(MAX_NOTE_CHARS) | None = None  # type: ignore[valid-type]
    policy: PolicyChange | None = None


class MetricDeclaration(BaseModel):
    model_config = ConfigDict(extra="allow")
    x: Literal[X_AXES] = "step"  # type: ignore[valid-type]
    summary: Literal[SUMMARIES] = "last"  # type: ignore[valid-type]


def _given(field: str) -> dict[str, Any]:
    return {"required": [field], "properties": {field: {"type": "object"}}}


def _set(field: str, schema: dict[str, Any]) -> dict[str, Any]:
    return {"required": [field], "properties": {field: schema}}


class UpdateEvent(_Event):
    """Changes the run's config, summary or metric declarations, or renames, retags or describes
    it (``name``, ``tags``: the whole new set, ``group``, ``notes``; ``""`` clears the last two):
    at least one of them."""

    # Under allOf: a client generator reads a model's top-level anyOf as its alternatives (no fields).
    model_config = ConfigDict(json_schema_extra={"allOf": [{"anyOf": [
        _given("config"), _given("summary"), _given("define"), _set("name", {"type": "string"}),
        _set("tags", {"type": "array"}), _set("group", {"type": "string"}), _set("notes", {"type": "string"}),
    ]}]})
    type: Literal["update"]
    config: JsonObject | None = None
    summary: JsonObject | None = None
    define: Annotated[
        dict[MetricName, MetricDeclaration], Field(min_length=1, max_length=MAX_METRICS_PER_EVENT)
    ] | None = None
    name: _text(MAX_NAME_CHARS, rf"^[^{_CONTROL}]+$", 1) | None = None  # type: ignore[valid-type]
    tags: Annotated[list[Tag], Field(max_length=MAX_TAGS)] | None = None
    group: _text(MAX_GROUP_CHARS) | None = None  # type: ignore[valid-type]
    notes: _text(MAX_NOTE_CHARS) | None = None  # type: ignore[valid-type]


# A logged metric's name: any metric name but the server's own series of step times.
LoggedMetricName = Annotated[
    str, Field(min_length=1, max_length=MAX_KEY_BYTES, pattern=rf"^[^{_CONTROL}]+$",
               description=f"At most {MAX_KEY_BYTES} bytes of UTF-8; not {TIMESTAMP_KEY!r} (reserved).",
               json_schema_extra={"not": {"const": TIMESTAMP_KEY}})
]


class MetricsEvent(_Event):
    type: Literal["metrics"]
    step: Step
    values: Annotated[
        dict[LoggedMetricName, WireValue],  # type: ignore[valid-type]
        Field(min_length=1, max_length=MAX_METRICS_PER_EVENT,
              description=f"Metric name -> value. {TIMESTAMP_KEY!r} is reserved: the server records each step's "
                          "time (the event's ts) under it, and refuses it here (422 naming values._timestamp)."),
    ]


class MetricsColumnsEvent(_Event):
    """Many metrics events of this run and segment as columns (docs/ingest.md#columnar-metrics): row i is
    ``{"step": steps[i], "ts": times[i], "values": {key: values[key][i] for each non-null one}}``."""

    type: Literal["metrics_columns"]
    steps: Annotated[list[Step], Field(min_length=1, max_length=MAX_BATCH_EVENTS)]
    times: Annotated[list[Annotated[float, Field(ge=0, le=MAX_TS)]], Field(min_length=1, max_length=MAX_BATCH_EVENTS,
                     description="Each row's ts, as long as steps.")]
    values: Annotated[
        dict[LoggedMetricName, list[WireValue | None]],  # type: ignore[valid-type]
        Field(min_length=1, max_length=MAX_METRICS_PER_EVENT,
              description="Metric name -> one value per step, null where the row does not log it (every row logs "
                          "one). Not system/ metrics. Each row counts as an event against the batch's limit."),
    ]


class CheckpointEvent(_Event):
    type: Literal["checkpoint"]
    step: Step
    path: _text(MAX_PATH_CHARS)  # type: ignore[valid-type]
    size: Count
    sha256: Annotated[str, Field(pattern=SHA256_RE.pattern)] | None = None
    metrics: Annotated[
        dict[MetricName, WireValue], Field(max_length=MAX_METRICS_PER_EVENT)  # type: ignore[valid-type]
    ] = {}
    public: bool = True
    status: Literal[CHECKPOINT_STATUSES] = "available"  # type: ignore[valid-type]


class DataMixEvent(_Event):
    type: Literal["data_mix"]
    step: Step
    weights: Annotated[dict[MetricName, Annotated[float, Field(ge=0)]], Field(min_length=1, max_length=MAX_MIX_SOURCES)]


class ManifestEvent(_Event):
    type: Literal["manifest"]
    step: Step | None = None
    version: _text(MAX_VERSION_CHARS, min_chars=1)  # type: ignore[valid-type]
    manifest: JsonObject | None = None


class NoteEvent(_Event):
    type: Literal["note"]
    step: Step | None = None
    text: _text(MAX_NOTE_CHARS, NOT_BLANK, 1)  # type: ignore[valid-type]


class HeartbeatEvent(_Event):
    type: Literal["heartbeat"]
    step: Step | None = None
    lost: Step | None = Field(None, description="Events of this segment the SDK could not keep so far.")


class FinishedEvent(_Event):
    type: Literal["finished"]
    step: Step | None = None
    status: Literal[FINAL_STATUSES]  # type: ignore[valid-type]
    lost: Step | None = None


class CommandAckEvent(_Event):
    """The trainer's answer to one of the team's commands (docs/commands.md)."""

    type: Literal["command_ack"]
    step: Step | None = None
    command: Annotated[str, Field(pattern=COMMAND_ID_RE.pattern, description="The command's id, as delivered.")]
    outcome: Literal[COMMAND_OUTCOMES]  # type: ignore[valid-type]
    message: _text(MAX_COMMAND_MESSAGE_CHARS) | None = None  # type: ignore[valid-type]


# What the model says and scores (docs/samples.md). A label (prompt id, suite, task): no
# control character, not blank.
_LABEL = rf"^[^{_CONTROL}]*[^{WHITESPACE}{_CONTROL}][^{_CONTROL}]*$"
ScoreMap = Annotated[dict[MetricName, WireValue], Field(max_length=MAX_SAMPLE_SCORES)]  # type: ignore[valid-type]
BinCount = Annotated[float, Field(ge=0)]
Cell = _text(MAX_TABLE_CELL_CHARS) | JsonNumber | bool | None


class SampleEvent(_Event):
    """A text generation: a prompt, what the model wrote, how it was scored and sampled."""

    type: Literal["sample"]
    step: Step
    key: MetricName
    prompt_id: _text(MAX_PROMPT_ID_CHARS, _LABEL, 1)  # type: ignore[valid-type]
    prompt: _text(MAX_PROMPT_CHARS)  # type: ignore[valid-type]
    output: _text(MAX_OUTPUT_CHARS)  # type: ignore[valid-type]
    reference: _text(MAX_PROMPT_CHARS) | None = None  # type: ignore[valid-type]
    scores: ScoreMap | None = None
    settings: JsonObject | None = Field(None, description=f"At most {MAX_SAMPLE_SETTINGS_BYTES} bytes encoded.")


class EvalEvent(_Event):
    """One task's scores from one evaluation suite; ``checkpoint``: the step of the checkpoint scored."""

    type: Literal["eval"]
    step: Step
    suite: _text(MAX_SUITE_CHARS, _LABEL, 1)  # type: ignore[valid-type]
    task: _text(MAX_TASK_CHARS, _LABEL, 1)  # type: ignore[valid-type]
    metrics: Annotated[
        dict[MetricName, WireValue], Field(min_length=1, max_length=MAX_EVAL_METRICS)  # type: ignore[valid-type]
    ]
    checkpoint: Step | None = None
    n: Count | None = None
    config: JsonObject | None = Field(None, description=f"At most {MAX_EVAL_CONFIG_BYTES} bytes encoded.")
    versions: JsonObject | None = Field(None, description=f"At most {MAX_EVAL_VERSIONS_BYTES} bytes encoded.")


class _MediaEvent(_Event):
    type: Literal["media"]
    step: Step
    key: MetricName
    caption: _text(MAX_CAPTION_CHARS) | None = None  # type: ignore[valid-type]


class ImageMediaEvent(_MediaEvent):
    """An image whose bytes the run's project holds (uploaded first: PUT /runs/{id}/blobs/{sha256})."""

    kind: Literal["image"]
    blob: Annotated[str, Field(pattern=SHA256_RE.pattern)]
    content_type: Literal[IMAGE_TYPES]  # type: ignore[valid-type]
    width: Annotated[int, Field(ge=1, le=MAX_IMAGE_SIDE)]
    height: Annotated[int, Field(ge=1, le=MAX_IMAGE_SIDE)]
    size: Annotated[int, Field(ge=1, le=MAX_INT)]


class TableMediaEvent(_MediaEvent):
    """A small table: each row exactly one cell per column."""

    kind: Literal["table"]
    columns: Annotated[list[MetricName], Field(min_length=1, max_length=MAX_TABLE_COLUMNS)]
    rows: Annotated[list[list[Cell]], Field(max_length=MAX_TABLE_ROWS,  # type: ignore[valid-type]
                                            description=f"At most {MAX_TABLE_BYTES} bytes encoded.")]


class HistogramMediaEvent(_MediaEvent):
    """Bins: edges strictly increasing, one count per bin (one fewer than the edges)."""

    kind: Literal["histogram"]
    edges: Annotated[list[float], Field(min_length=2, max_length=MAX_HISTOGRAM_BINS + 1)]
    counts: Annotated[list[BinCount], Field(max_length=MAX_HISTOGRAM_BINS)]
    nan: BinCount | None = None
    inf: BinCount | None = None
    neg_inf: BinCount | None = None


# A named alias: its schema is a component of its own, which the batch's discriminator maps "media" to.
MediaEvent = TypeAliasType(
    "MediaEvent", Annotated[ImageMediaEvent | TableMediaEvent | HistogramMediaEvent, Field(discriminator="kind")]
)

WireEvent = Annotated[
    RunStartedEvent | UpdateEvent | MetricsEvent | MetricsColumnsEvent | CheckpointEvent | DataMixEvent | ManifestEvent | NoteEvent
    | HeartbeatEvent | FinishedEvent | SampleEvent | EvalEvent | MediaEvent | CommandAckEvent,
    Field(discriminator="type"),
]


class IngestBatch(BaseModel):
    """The body of ``POST /ingest``: at most MAX_BATCH_EVENTS events (and MAX_BATCH_BYTES bytes).
    An integer is written without a fraction (``2``, not ``2.0``)."""

    v: Literal[1] = 1
    events: Annotated[list[WireEvent], Field(min_length=1, max_length=MAX_BATCH_EVENTS)]
