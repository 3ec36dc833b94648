"""An example's output against the output its doc shows: JSON by shape (every key the doc shows is in
the answer, objects where it shows objects, lists where it shows lists; values, ids and times
vary), text line by line in order (numbers vary; a JSON object on a line compared by shape)."""

from __future__ import annotations

import json
import re
from typing import Any

_ELLIPSIS = re.compile(r"(?<=[:\[,\s])…(?=[\s,\]}])")  # `"activations": …` in a doc: any value
_NUMBER = re.compile(r"-?\d+(\.\d+)?([eE][-+]?\d+)?")
# Objects whose keys are data (metric names, config keys), not fields: any keys will do.
MAPS = frozenset({"config", "last_values", "metrics", "summary", "values", "weights"})


def json_problems(documented: str, actual: str) -> list[str]:
    """What the actual JSON lacks of the documented one's shape ([] when it has all of it)."""
    try:
        doc = json.loads(_ELLIPSIS.sub("null", documented))
    except json.JSONDecodeError as exc:
        return [f"the documented JSON does not parse: {exc}"]
    try:
        got = json.loads(actual)
    except json.JSONDecodeError as exc:
        return [f"the output is not JSON ({exc}): {actual[:300]!r}"]
    return shape_problems(doc, got)


def shape_problems(doc: Any, got: Any, where: str = "") -> list[str]:
    """Keys and nesting of ``doc`` missing from ``got``; a documented null stands for anything."""
    if doc is None:
        return []
    if isinstance(doc, dict):
        if not isinstance(got, dict):
            return [f"{where or 'the answer'}: documented an object, got {json.dumps(got)[:120]}"]
        if where.rpartition(".")[2] in MAPS:
            return []
        return [problem for key, value in doc.items()
                for problem in (shape_problems(value, got[key], f"{where}.{key}") if key in got
                                else [f"{where}.{key}: documented, not in the answer (keys: {', '.join(got)})"])]  # fmt: skip
    if isinstance(doc, list):
        if not isinstance(got, list):
            return [f"{where or 'the answer'}: documented a list, got {json.dumps(got)[:120]}"]
        return [p for i, (d, g) in enumerate(zip(doc, got)) for p in shape_problems(d, g, f"{where}[{i}]")]
    if isinstance(got, dict | list):
        return [f"{where}: documented a value, got {json.dumps(got)[:120]}"]
    return []


def text_problems(documented: str, actual: str) -> list[str]:
    """Each non-blank documented line must match an output line, in order (numbers may differ)."""
    lines = [line for line in actual.splitlines() if line.strip()]
    position = 0
    for wanted in (line for line in documented.splitlines() if line.strip()):
        while position < len(lines) and not _same_line(wanted, lines[position]):
            position += 1
        if position == len(lines):
            return [f"documented line not in the output (in order): {wanted!r}"]
        position += 1
    return []


def _same_line(doc: str, got: str) -> bool:
    if doc == got or _NUMBER.sub("0", doc) == _NUMBER.sub("0", got):
        return True
    head, brace, _ = doc.partition("{")
    if brace and got.startswith(head) and got[len(head) : len(head) + 1] == "{":
        return not json_problems(doc[len(head) :], got[len(head) :])
    return False
