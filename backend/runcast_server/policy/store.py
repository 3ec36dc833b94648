"""Reading and writing policies. A change bumps the affected runs' ``version`` without a
``run_versions`` row, so every live channel of those runs sends ``event: reset`` and each
viewer reloads under the new policy (live.replay.read_versions: a version without a log row)."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from runcast.wire.policy import effective
from sqlalchemy import Connection, select, update
from sqlalchemy.orm import Session

from runcast_server.core.db import upsert
from runcast_server.policy.models import ProjectPolicy, RunPolicy
from runcast_server.record.models import Run

Publish = Callable[[str, dict[str, Any]], None]


def project_settings(session: Session, project_id: int) -> dict[str, Any]:
    return session.scalar(select(ProjectPolicy.settings).where(ProjectPolicy.project_id == project_id)) or {}


def run_settings(session: Session, run_id: str) -> dict[str, Any]:
    return session.scalar(select(RunPolicy.settings).where(RunPolicy.run_id == run_id)) or {}


def run_policy(session: Session, run: Run) -> dict[str, Any]:
    """The policy in force for ``run``: the default, the project's, then the run's overrides."""
    return effective(project_settings(session, run.project_id), run_settings(session, run.id))


def _merge(old: dict[str, Any], change: dict[str, Any]) -> dict[str, Any]:
    out = {**old, **change}
    return {k: v for k, v in out.items() if v is not None}  # null: back to the layer below


def _bump(session: Session, run_ids: list[str]) -> list[str]:
    if run_ids:
        session.execute(update(Run).where(Run.id.in_(run_ids)).values(version=Run.version + 1))
    return run_ids


def set_run_policy(session: Session, run: Run, change: dict[str, Any]) -> list[str]:
    """Merge ``change`` (checked) into the run's overrides; returns the runs whose viewers must reload."""
    row = session.get(RunPolicy, run.id, with_for_update=True)
    if row is None:
        session.add(RunPolicy(run_id=run.id, settings=_merge({}, change), updated_at=time.time()))
        session.flush()
    else:
        row.settings = _merge(row.settings, change)
        row.updated_at = time.time()
    return _bump(session, [run.id])


def record_initial(conn: Connection, policies: dict[str, dict[str, Any]], now: float) -> None:
    """The policies ``runcast.init(policy=...)`` sent with new runs (ingest.register_runs):
    stored in the same transaction as the run, before any of its data; a run that has one keeps it."""
    rows = [{"run_id": r, "settings": _merge({}, s), "updated_at": now} for r, s in sorted(policies.items())]
    if rows:
        conn.execute(upsert(conn, RunPolicy.__table__).on_conflict_do_nothing(index_elements=["run_id"]), rows)


def set_project_policy(session: Session, project_id: int, change: dict[str, Any]) -> list[str]:
    """Merge ``change`` into the project's default; returns the project's runs (their viewers reload)."""
    row = session.get(ProjectPolicy, project_id, with_for_update=True)
    if row is None:
        session.add(ProjectPolicy(project_id=project_id, settings=_merge({}, change), updated_at=time.time()))
    else:
        row.settings = _merge(row.settings, change)
        row.updated_at = time.time()
    session.flush()
    return _bump(session, list(session.scalars(select(Run.id).where(Run.project_id == project_id).order_by(Run.id))))


def announce(publish: Publish, session: Session, run_ids: list[str]) -> None:
    """After commit: tell live channels the runs moved on (they reset their viewers)."""
    for run_id, version in session.execute(select(Run.id, Run.version).where(Run.id.in_(run_ids))).all():
        publish(run_id, {"run": run_id, "version": version, "policy": True})


def run_policies(session: Session, runs: list[Run]) -> dict[str, dict[str, Any]]:
    """The policy in force for each of ``runs`` (two queries, whatever their number)."""
    if not runs:
        return {}
    projects: dict[int, dict[str, Any]] = dict(session.execute(
        select(ProjectPolicy.project_id, ProjectPolicy.settings)
        .where(ProjectPolicy.project_id.in_({r.project_id for r in runs}))).all())
    own: dict[str, dict[str, Any]] = dict(session.execute(
        select(RunPolicy.run_id, RunPolicy.settings).where(RunPolicy.run_id.in_([r.id for r in runs]))).all())
    return {r.id: effective(projects.get(r.project_id), own.get(r.id)) for r in runs}
