"""The schema's numbers and patterns: every limit of ``runcast.wire.events`` (which re-exports them).

This module uses only the standard library: the SDK and the backend import it.
"""

from __future__ import annotations

import re
from typing import Final

SCHEMA_VERSION: Final = 1

EVENT_TYPES: Final = (
    "run_started",
    "metrics",
    "checkpoint",
    "data_mix",
    "manifest",
    "note",
    "heartbeat",
    "finished",
    "update",
    "sample",
    "eval",
    "media",
    "command_ack",
    "metrics_columns",
)
# Many metrics events of one run and segment as columns (runcast.wire.columns); a server lists the
# types it takes in ``event_types`` of ``GET /api/v1/whoami``, and the SDK sends this one only then.
COLUMNS_TYPE: Final = "metrics_columns"
FINAL_STATUSES: Final = ("finished", "failed", "killed")
VISIBILITIES: Final = ("public", "unlisted", "private")
CHECKPOINT_STATUSES: Final = ("available", "pruned")
# A command from the team (docs/commands.md): what it asks, and what the trainer answers.
COMMAND_KINDS: Final = ("stop", "checkpoint", "pause", "resume", "set")
COMMAND_OUTCOMES: Final = ("applied", "refused")
MAX_COMMAND_MESSAGE_CHARS: Final = 1000
COMMAND_ID_RE: Final = re.compile(r"^cmd_[A-Za-z0-9_-]{8,60}$")

# The most events one batch may hold (the server refuses more; earlier servers took 5000 and say so
# in whoami). A columnar event (runcast.wire.columns) counts each of its rows.
MAX_BATCH_EVENTS: Final = 20_000
# What every server accepts, releases before 5000 included: a sender cuts batches at this size
# until the server names its own maximum (``max_batch_events`` of ``GET /api/v1/whoami``).
COMPATIBLE_BATCH_EVENTS: Final = 1000
MAX_BATCH_BYTES: Final = 8 * 1024 * 1024
MAX_METRICS_PER_EVENT: Final = 1000
# The most points one batch may carry; a columnar event counts each non-null cell as a point.
MAX_BATCH_POINTS: Final = 5_000_000
MAX_KEY_BYTES: Final = 200
MAX_STEP: Final = 2**53 - 1
MAX_SEQ: Final = 2**53 - 1
MAX_INT: Final = 2**63 - 1  # a signed 64-bit column (seed, size, integers inside JSON objects)
MAX_TS: Final = 253_402_300_799.0  # 9999-12-31T23:59:59Z: any date library can show it
MAX_JSON_DEPTH: Final = 64
MAX_NAME_CHARS: Final = 200
MAX_PROJECT_CHARS: Final = 100
MAX_NOTE_CHARS: Final = 10_000
MAX_PATH_CHARS: Final = 4096
MAX_VERSION_CHARS: Final = 100
MAX_MIX_SOURCES: Final = 256
MAX_CONFIG_BYTES: Final = 256 * 1024
MAX_CODE_BYTES: Final = 1024 * 1024
MAX_ENV_BYTES: Final = 64 * 1024
MAX_MANIFEST_BYTES: Final = 1024 * 1024
MAX_ALERTS_BYTES: Final = 16 * 1024
# Keys the SDK's system sampler sends (runcast.system): system/<node>/rank<r>/<name>, the step
# a wall-clock second. An event holding only such keys does not move the run's step, last
# values or heartbeat.
SYSTEM_PREFIX: Final = "system/"
# The series the server records each step's wall time in (epoch seconds: the metrics event's
# ``ts``; W&B's history column of the same name). Reserved: no event may log it.
TIMESTAMP_KEY: Final = "_timestamp"
MAX_SUMMARY_BYTES: Final = 64 * 1024
MAX_TAGS: Final = 64
MAX_TAG_CHARS: Final = 64
MAX_GROUP_CHARS: Final = 128
MAX_JOB_TYPE_CHARS: Final = 64
# What the model says and scores (docs/samples.md): sample, eval and media events.
MAX_PROMPT_ID_CHARS: Final = 200
MAX_PROMPT_CHARS: Final = 65_536
MAX_OUTPUT_CHARS: Final = 262_144
MAX_SAMPLE_SCORES: Final = 64
MAX_SAMPLE_SETTINGS_BYTES: Final = 4096
MAX_SUITE_CHARS: Final = 100
MAX_TASK_CHARS: Final = 200
MAX_EVAL_METRICS: Final = 256
MAX_EVAL_CONFIG_BYTES: Final = 64 * 1024
MAX_EVAL_VERSIONS_BYTES: Final = 4096
MEDIA_KINDS: Final = ("image", "table", "histogram")
IMAGE_TYPES: Final = ("image/png", "image/jpeg")
MAX_IMAGE_SIDE: Final = 65_535
MAX_CAPTION_CHARS: Final = 1000
MAX_TABLE_COLUMNS: Final = 64
MAX_TABLE_ROWS: Final = 1000
MAX_TABLE_CELL_CHARS: Final = 10_000
MAX_TABLE_BYTES: Final = 256 * 1024
MAX_HISTOGRAM_BINS: Final = 512
X_AXES: Final = ("step", "tokens", "time")
SUMMARIES: Final = ("min", "max", "last", "none")

ID_RE: Final = re.compile(r"^[A-Za-z0-9_-]{8,64}$")
PROJECT_RE: Final = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,99}$")
SHA256_RE: Final = re.compile(r"^[0-9a-f]{64}$")
CONTROL_RE: Final = re.compile(r"[\x00-\x1f\x7f-\x9f]")  # no name, tag or metric name holds one
# What str.strip() removes (Python's \s), spelled out for a pattern every regex dialect reads alike:
# ECMA's \s (JSON Schema) lacks \x1c-\x1f and \x85 and has \ufeff; Rust's (pydantic) lacks \x1c-\x1f.
WHITESPACE: Final = r"\t-\r\x1c-\x20\x85\xa0\u1680\u2000-\u200a\u2028\u2029\u202f\u205f\u3000"
# Text as check_text keeps it, for the OpenAPI document (a lone surrogate, which it refuses too, no pattern
# can name); and such text that strip() leaves non-empty.
NO_NUL: Final = r"^[^\x00]*$"
NOT_BLANK: Final = rf"^[^\x00]*[^{WHITESPACE}\x00][^\x00]*$"
