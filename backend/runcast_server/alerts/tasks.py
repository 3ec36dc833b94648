"""The alerts' Celery tasks: fan-out and delivery (``notify``), the periodic check (``stall``) and
the pruning of finished deliveries. Each runs with the context its process bound to the Celery
app at start (``runcast_server.tasks``)."""

from __future__ import annotations

from typing import TYPE_CHECKING, cast

from celery import Task

from runcast_server.alerts.notify import (
    DELIVER_TASK,
    FANOUT_TASK,
    PRUNE_TASK,
    SWEEP_TASK,
    deliver,
    fanout,
    prune_deliveries,
)
from runcast_server.alerts.stall import sweep
from runcast_server.core.celery_app import app, context_of

if TYPE_CHECKING:
    from runcast_server.alerts.needs import AlertContext


@app.task(name=FANOUT_TASK, bind=True, acks_late=True)
def fanout_task(self: Task, alert_id: int, phase: str) -> int:
    return len(fanout(_context(self), alert_id, phase))


@app.task(name=DELIVER_TASK, bind=True, acks_late=True)
def deliver_task(self: Task, delivery_id: int) -> str:
    return deliver(_context(self), delivery_id)


@app.task(name=SWEEP_TASK, bind=True, acks_late=True, expires=60)
def sweep_task(self: Task) -> int:
    return sweep(_context(self))


@app.task(name=PRUNE_TASK, bind=True, acks_late=True, expires=3600)
def prune_task(self: Task) -> int:
    return prune_deliveries(_context(self))


def _context(task: Task) -> AlertContext:
    return cast("AlertContext", context_of(task.app))
