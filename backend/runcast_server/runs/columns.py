"""The run table's columns and filters as the run list takes them (``GET /runs?column=&filter=&sort=``).

A column is a run field (``name``, ``status``, ``created_at``, ...) or ``config.<key>``,
``summary.<key>`` or ``metric.<key>`` (the metric's last value): ``<key>`` is a top-level key,
taken whole (dots included). A filter is the JSON array ``[column, op, value]``.
"""

from __future__ import annotations

import json
import math
import re
from dataclasses import dataclass
from typing import Final, Literal

from runcast_server.core.errors import Invalid

Kind = Literal["field", "config", "summary", "metric"]
Op = Literal["eq", "ne", "lt", "le", "gt", "ge"]
Scalar = str | float | bool

NUMERIC_FIELDS: Final = frozenset({"created_at", "started_at", "finished_at", "heartbeat_at", "last_step"})
TEXT_FIELDS: Final = frozenset({"name", "project", "status", "group", "job_type"})
KINDS: Final = ("config", "summary", "metric")
OPS: Final = ("eq", "ne", "lt", "le", "gt", "ge")
ORDER_OPS: Final = frozenset({"lt", "le", "gt", "ge"})
MAX_KEY: Final = 200
MAX_TEXT: Final = 200
# A key SQLite's JSON path can address ('$."key"': no double quote) and a page can show.
_KEY: Final = re.compile(r'^[^"\x00-\x1f\x7f]+$')
# What a column can be, as the OpenAPI document states it.
COLUMN_PATTERN: Final = (
    rf'^(?:{"|".join(sorted(NUMERIC_FIELDS | TEXT_FIELDS))}|(?:{"|".join(KINDS)})\.[^"\x00-\x1f\x7f]{{1,{MAX_KEY}}})$'
)


@dataclass(frozen=True)
class Column:
    """``kind`` ``field``: ``key`` is a run field; otherwise a top-level key of the run's config,
    summary or last metric values."""

    kind: Kind
    key: str

    @property
    def name(self) -> str:
        return self.key if self.kind == "field" else f"{self.kind}.{self.key}"

    @property
    def numeric_field(self) -> bool:
        return self.kind == "field" and self.key in NUMERIC_FIELDS


@dataclass(frozen=True)
class Filter:
    column: Column
    op: Op
    value: Scalar


def parse_column(text: str, field: str) -> Column:
    """``text`` as a column; ``Invalid`` naming ``field`` otherwise."""
    if text in NUMERIC_FIELDS or text in TEXT_FIELDS:
        return Column("field", text)
    kind, dot, key = text.partition(".")
    if kind not in KINDS or not dot:
        raise Invalid(f"unknown column {text!r}: a run field, or config.<key>, summary.<key>, metric.<key>", field=field)
    if not key or len(key) > MAX_KEY or not _KEY.match(key):
        raise Invalid(f"column {text!r}: a key is 1 to {MAX_KEY} characters, no double quote or control character",
                      field=field)
    return Column(kind, key)  # type: ignore[arg-type]  # kind is one of KINDS


def parse_filter(text: str, field: str = "filter") -> Filter:
    """One ``filter`` parameter: the JSON array ``[column, op, value]``."""
    try:
        raw = json.loads(text)
    except ValueError:
        raise Invalid('a filter is a JSON array [column, op, value], e.g. ["config.lr", "ge", 0.001]',
                      field=field) from None
    if not isinstance(raw, list) or len(raw) != 3 or not isinstance(raw[0], str):
        raise Invalid("a filter is a JSON array [column, op, value]", field=field)
    column = parse_column(raw[0], field)
    op, value = raw[1], raw[2]
    if op not in OPS:
        raise Invalid(f"unknown operator {op!r}: one of {', '.join(OPS)}", field=field)
    if isinstance(value, bool):
        if op in ORDER_OPS or column.kind == "field":
            raise Invalid(f"{op} {value!r}: true and false compare with eq and ne on config, summary or metric",
                          field=field)
    elif isinstance(value, (int, float)):
        if not math.isfinite(value) or (column.kind == "field" and not column.numeric_field):
            raise Invalid(f"{column.name} {op} {value!r}: not a number this column can hold", field=field)
        value = float(value)
    elif isinstance(value, str):
        if op in ORDER_OPS or column.numeric_field or len(value) > MAX_TEXT:
            raise Invalid(f"{column.name} {op}: text compares with eq and ne only, up to {MAX_TEXT} characters",
                          field=field)
    else:
        raise Invalid(f"{column.name} {op}: the value is a number, text, true or false", field=field)
    return Filter(column, op, value)
