"""The run list as a table: filters, sort, group aggregates, and the cells of chosen columns."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Final, Literal

from sqlalchemy import ColumnElement, Select, func, select
from sqlalchemy.orm import Session

from runcast_server.core.models import Project
from runcast_server.policy.apply import View
from runcast_server.reads.published import published_config
from runcast_server.reads.schemas import Aggregate, RunGroup, RunSummary, TableKeys
from runcast_server.reads.values import strict_json
from runcast_server.record.models import Run
from runcast_server.runs.columns import Column, Filter
from runcast_server.runs.tablesql import Values

MAX_GROUPS: Final = 500


@dataclass(frozen=True)
class Table:
    """What the run list was asked beyond its plain filters (all checked: runs.columns)."""

    columns: list[Column] = field(default_factory=list)
    filters: list[Filter] = field(default_factory=list)
    sort: Column | None = None
    order: Literal["asc", "desc"] = "desc"
    offset: int = 0
    group_by: Literal["group"] | None = None
    keys: bool = False

    @property
    def keyset(self) -> bool:
        """Whether pages go by cursor (newest first, no ?sort=) rather than by offset."""
        return self.sort is None and self.group_by is None


def conditions(values: Values, table: Table) -> list[ColumnElement[bool]]:
    return [values.condition(f) for f in table.filters]


def ordering(values: Values, table: Table) -> list[Any]:
    """ORDER BY of a table page: by group first when grouping, then the sort, then newest first."""
    terms: list[Any] = [Run.group_name.asc().nulls_last()] if table.group_by else []
    if table.sort is not None:
        terms += values.order(table.sort, table.order == "desc")
    return [*terms, Run.created_at.desc(), Run.id.desc()]


def groups(session: Session, values: Values, table: Table, where: list[ColumnElement[bool]]) -> list[RunGroup]:
    """Each group of the runs ``where`` selects: its count and its numeric columns' min, mean and max."""
    numeric = [c for c in table.columns if c.kind != "field" or c.numeric_field]
    # Each cell computed once per run (materialized: SQLite would otherwise parse the JSON per aggregate).
    cells_cte = (
        select(Run.group_name.label("g"), *[values.number(c).label(f"c{i}") for i, c in enumerate(numeric)])
        .select_from(Run).join(Project, Project.id == Run.project_id).where(*where)
        .cte("cells").prefix_with("MATERIALIZED")
    )
    figures: list[Any] = []
    for i in range(len(numeric)):
        n = cells_cte.c[f"c{i}"]
        figures += [func.min(n), func.avg(n), func.max(n)]
    g = cells_cte.c.g
    query: Select[Any] = (
        select(g, func.count(), *figures).group_by(g).order_by(g.asc().nulls_last()).limit(MAX_GROUPS)
    )
    out = []
    for row in session.execute(query):
        aggregates = {c.name: Aggregate(min=_finite(row[2 + 3 * i]), mean=_finite(row[3 + 3 * i]),
                                        max=_finite(row[4 + 3 * i])) for i, c in enumerate(numeric)
                      if row[2 + 3 * i] is not None}  # a column with no number in the group: none
        out.append(RunGroup(group=row[0], count=row[1], aggregates=aggregates))
    return out


def _finite(value: Any) -> float | None:
    return float(value) if value is not None and math.isfinite(float(value)) else None


def cells(run: Run, summary: RunSummary, view: View, full: bool, columns: list[Column]) -> dict[str, Any]:
    """The run's values of the config, summary and metric ``columns``, as this view publishes them."""
    config = view.config(published_config(strict_json(run.config or {}), full))
    sums = view.by_key(published_config(strict_json(run.summary or {}), full))
    out: dict[str, Any] = {}
    for c in columns:
        if c.kind == "config" and c.key in config:
            out[c.name] = config[c.key]
        elif c.kind == "summary" and c.key in sums:
            out[c.name] = sums[c.key]
        elif c.kind == "metric" and c.key in summary.last_values:
            out[c.name] = summary.last_values[c.key].value
    return out


def page_keys(runs: list[tuple[Run, RunSummary, View, bool]]) -> TableKeys:
    """The config, summary and metric keys the page's runs show their reader."""
    config: set[str] = set()
    sums: set[str] = set()
    metric: set[str] = set()
    for run, summary, view, full in runs:
        config.update(view.config(published_config(run.config or {}, full)))
        sums.update(view.by_key(dict(run.summary or {})))
        metric.update(summary.last_values)
    return TableKeys(config=sorted(config), summary=sorted(sums), metric=sorted(metric))
