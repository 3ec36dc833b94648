"""SQL for the run table's columns: a JSON key's number or text, as this viewer may see it.

Keys travel as bound parameters (a JSON path), never in the SQL text. SQLite and PostgreSQL
differ in how they name a JSON value's type, so each gets its own expression. A value the
viewer may not see is NULL, so it neither matches a filter nor places a run in a sort:

* a config key the run's publication policy withholds, a metric (last value or summary) its
  ``metrics`` setting withholds, and any metric of a run published with a delay (its last
  values are newer than what the public sees);
* unless the run shows its paths (``public_paths``): a value under a path-like key
  (``out_dir``), and text with a slash, a backslash or a leading ``~`` (reads/published.py).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any, Final

from runcast.wire.policy import allows, effective
from sqlalchemy import ColumnElement, Float, and_, case, cast, false, func, literal, or_, select, true
from sqlalchemy.dialects.postgresql import JSONB
from sqlalchemy.orm import Session

from runcast_server.core.models import Project
from runcast_server.policy.models import ProjectPolicy, RunPolicy
from runcast_server.reads.published import path_key
from runcast_server.record.models import Run
from runcast_server.runs.columns import Column, Filter

_FIELDS: Final[dict[str, Any]] = {
    "name": Run.name, "project": Project.name, "status": Run.status, "group": Run.group_name,
    "job_type": Run.job_type, "created_at": Run.created_at, "started_at": Run.started_at,
    "finished_at": Run.finished_at, "heartbeat_at": Run.heartbeat_at, "last_step": Run.last_step,
}
_SOURCE: Final[dict[str, Any]] = {"config": Run.config, "summary": Run.summary, "metric": Run.last_values}
_TRUE: Final = cast(literal("true"), JSONB)
_FALSE: Final = cast(literal("false"), JSONB)
# PostgreSQL: the same as jsonb, parsed when the run was written (migration 0019).
_PARSED: Final[dict[str, Any]] = {
    "config": Run.config_jsonb, "summary": Run.summary_jsonb, "metric": Run.last_values_jsonb,
}


@dataclass
class Values:
    """Builds the expressions of one request (one viewer, one dialect); policies read once."""

    session: Session
    viewer: Project | None
    _policies: tuple[dict[int, dict[str, Any]], list[tuple[str, int, dict[str, Any]]]] | None = field(default=None)

    @property
    def sqlite(self) -> bool:
        return self.session.get_bind().dialect.name == "sqlite"

    def _typed(self, column: Column) -> tuple[dict[str, ColumnElement[bool]], ColumnElement[Any], ColumnElement[Any]]:
        """Whether the key's value is a ``number``, ``text``, ``true`` or ``false``; its number; its text."""
        if self.sqlite:
            source = _SOURCE[column.kind]
            # SQLite matches a path's key against the key as stored, escapes included; the server
            # stores ``\u00fc`` for ``ü`` (json.dumps), a JSON text written elsewhere may hold ``ü``.
            tail = "[1]" if column.kind == "metric" else ""
            paths = list(dict.fromkeys(f'$."{k}"{tail}' for k in (json.dumps(column.key)[1:-1], column.key)))
            kinds = [func.json_type(source, literal(p)) for p in paths]
            values = [func.json_extract(source, literal(p)) for p in paths]
            kind, value = (kinds[0], values[0]) if len(paths) == 1 else (func.coalesce(*kinds), func.coalesce(*values))
            tests = {"number": kind.in_(("integer", "real")), "text": kind == "text", "true": kind == "true",
                     "false": kind == "false"}
            return tests, value, value
        parsed = _PARSED[column.kind]
        element = parsed[(column.key, 1)] if column.kind == "metric" else parsed[column.key]
        kind = func.jsonb_typeof(element)
        tests = {"number": kind == "number", "text": kind == "string", "true": element == _TRUE,
                 "false": element == _FALSE}
        # A jsonb number casts to double precision without going through its text.
        return tests, cast(element, Float), element.as_string()

    def number(self, column: Column) -> ColumnElement[Any]:
        """The column's value where it is a number (NULL otherwise)."""
        if column.kind == "field":
            return _FIELDS[column.key]
        tests, value, _ = self._typed(column)
        return case((and_(tests["number"], ~self.hidden(column)), value))

    def text(self, column: Column) -> ColumnElement[Any]:
        """The column's value where it is text (NULL otherwise)."""
        if column.kind == "field":
            return _FIELDS[column.key]
        tests, _, value = self._typed(column)
        return case((and_(tests["text"], ~self.hidden(column), ~self._pathlike(value)), value))

    def _pathlike(self, value: ColumnElement[Any]) -> ColumnElement[bool]:
        """Text that may hold a path (a slash, a backslash or a tilde anywhere), for a reader who
        does not see the run's paths; one evaluation of ``value`` (SQLite parses the JSON per use)."""
        test = value.op("GLOB")(literal("*[/\\~]*")) if self.sqlite else value.regexp_match(r"[/\\~]")
        return and_(self.outsider(), ~Run.public_paths, test)

    def boolean(self, column: Column, value: bool) -> ColumnElement[bool]:
        tests, _, _ = self._typed(column)
        return and_(tests["true" if value else "false"], ~self.hidden(column))

    def order(self, column: Column, descending: bool) -> list[ColumnElement[Any]]:
        """ORDER BY terms; runs without a number or text last. SQLite: the JSON value itself (numbers
        before text, as SQLite orders types), so each row's JSON is parsed once rather than per
        term (its parse cache serves the type and the value); PostgreSQL: numbers, then text."""
        if column.kind == "field":
            terms = [self.number(column)]
        elif self.sqlite:
            tests, value, _ = self._typed(column)
            shown = and_(or_(tests["number"], tests["text"]), ~self.hidden(column), ~self._pathlike(value))
            terms = [case((shown, value))]  # true, false, null, objects and lists: no value
        else:
            terms = [self.number(column), self.text(column)]
        return [(t.desc() if descending else t.asc()).nulls_last() for t in terms]

    def condition(self, f: Filter) -> ColumnElement[bool]:
        """The SQL of one filter; ``ne`` matches only runs that have a value of the same type."""
        if isinstance(f.value, bool):
            same = self.boolean(f.column, f.value)
            return same if f.op == "eq" else self.boolean(f.column, not f.value)
        expr = self.text(f.column) if isinstance(f.value, str) else self.number(f.column)
        ops = {"eq": expr == f.value, "ne": expr != f.value, "lt": expr < f.value, "le": expr <= f.value,
               "gt": expr > f.value, "ge": expr >= f.value}
        # A run without a value (NULL) compares as NULL, which WHERE drops: ne included.
        return ops[f.op]

    # --- what the viewer may see -----------------------------------------------------------------
    def outsider(self) -> ColumnElement[bool]:
        """Rows of runs outside the viewer's project (the public's view applies to them)."""
        return true() if self.viewer is None else Run.project_id != self.viewer.id

    def hidden(self, column: Column) -> ColumnElement[bool]:
        """Rows whose value of ``column`` the viewer may not see."""
        projects, runs = self._read_policies()
        setting = "config" if column.kind == "config" else "metrics"

        def hides(policy: dict[str, Any]) -> bool:
            return not allows(policy[setting], column.key) or (column.kind == "metric" and bool(policy.get("delay_s")))

        hidden_projects = [p for p, s in projects.items() if hides(effective(s))]
        hidden_runs = [r for r, p, s in runs if hides(effective(projects.get(p), s))]
        hidden_set = set(hidden_runs)
        shown_runs = [r for r, _, _ in runs if r not in hidden_set]
        by_policy = or_(Run.id.in_(hidden_runs) if hidden_runs else false(),
                        and_(Run.project_id.in_(hidden_projects), Run.id.not_in(shown_runs)) if hidden_projects else false())
        by_path = ~Run.public_paths if column.kind != "metric" and path_key(column.key) else false()
        return and_(self.outsider(), or_(by_policy, by_path))

    def _read_policies(self) -> tuple[dict[int, dict[str, Any]], list[tuple[str, int, dict[str, Any]]]]:
        if self._policies is None:
            outside = Run.project_id != self.viewer.id if self.viewer is not None else true()
            projects = {p: s for p, s in self.session.execute(select(ProjectPolicy.project_id, ProjectPolicy.settings))}
            runs = [(r, p, s) for r, p, s in self.session.execute(
                select(RunPolicy.run_id, Run.project_id, RunPolicy.settings).join(Run, Run.id == RunPolicy.run_id)
                .where(outside))]
            self._policies = (projects, runs)
        return self._policies
