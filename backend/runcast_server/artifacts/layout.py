"""Moving checkpoints recorded before the per-project layout into their project's directory.

Checkpoint files are served only from ``<storage root>/<project>/`` (docs/artifacts.md).
A checkpoint recorded earlier at ``run1/step100.pt`` (or at the absolute path of that
file) is moved to ``<project>/run1/step100.pt`` and its events are rewritten to name
the new place, so the run lists it as before. ``runcast storage migrate`` prints the
plan; ``--apply`` carries it out.

A file that checkpoint events of two projects name is left where it is and reported:
which project owns it is for the operator to decide (one of them may have named the
other's file on purpose, the hole this layout closes).
"""

from __future__ import annotations

import os
from collections import defaultdict
from dataclasses import dataclass, field

from sqlalchemy import select, update
from sqlalchemy.orm import Session

from runcast_server.artifacts.storage import LocalStorage, UnsafePath, safe_relative
from runcast_server.core.models import Project
from runcast_server.record.models import Event, Run


@dataclass
class Move:
    """One file (``old`` key under the root) and the checkpoint events that name it."""

    project: str
    old: str
    new: str
    events: list[int] = field(default_factory=list)


@dataclass
class Plan:
    moves: list[Move] = field(default_factory=list)
    shared: dict[str, list[str]] = field(default_factory=dict)  # key -> the projects naming it

    def lines(self) -> list[str]:
        out = [f"move {m.old} -> {m.new} ({len(m.events)} checkpoint events)" for m in self.moves]
        out += [f"left alone: {key} is named by checkpoints of several projects: {', '.join(p)}"
                for key, p in sorted(self.shared.items())]
        return out


def plan(session: Session, storage: LocalStorage) -> Plan:
    """What ``apply`` would do: every checkpoint event whose file is outside its project's directory."""
    rows = session.execute(
        select(Event.id, Event.payload, Project.name)
        .join(Run, Run.id == Event.run_id)
        .join(Project, Project.id == Run.project_id)
        .where(Event.type == "checkpoint")
        .order_by(Event.id)
    ).all()
    by_key: dict[str, dict[str, list[int]]] = defaultdict(lambda: defaultdict(list))
    for event_id, payload, project in rows:
        try:
            key = safe_relative(str((payload or {}).get("path", "")), storage.root, storage.trainer_root)
        except UnsafePath:
            continue  # refused by the path rules whatever the layout
        if not key.startswith(project + "/"):
            by_key[key][project].append(event_id)
    out = Plan()
    for key, projects in sorted(by_key.items()):
        if len(projects) > 1:
            out.shared[key] = sorted(projects)
            continue
        ((project, events),) = projects.items()
        out.moves.append(Move(project=project, old=key, new=f"{project}/{key}", events=events))
    return out


def apply(session: Session, storage: LocalStorage, the_plan: Plan) -> list[str]:
    """Move each file (when it is there) and rewrite its events; returns what could not be moved."""
    problems: list[str] = []
    for move in the_plan.moves:
        source = os.path.join(storage.root, move.old)
        target = os.path.join(storage.root, move.new)
        if os.path.lexists(source):
            if os.path.lexists(target):
                problems.append(f"not moved: {move.new} exists already")
                continue
            os.makedirs(os.path.dirname(target), exist_ok=True)
            os.rename(source, target)
        # A file already gone (pruned), or moved by an interrupted earlier run: the events only.
        for event_id in move.events:
            payload = dict(session.scalar(select(Event.payload).where(Event.id == event_id)) or {})
            payload["path"] = move.new
            session.execute(update(Event).where(Event.id == event_id).values(payload=payload))
        session.commit()  # one file at a time: a crash leaves every checkpoint consistent
    return problems
