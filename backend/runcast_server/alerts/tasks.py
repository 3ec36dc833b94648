"""The alerts' Celery tasks: fan-out and delivery of alerts (``notify``), the periodic check
(``stall``) and the pruning of finished deliveries. Registered on every Runcast Celery app (``shared_task``); each
runs with the context of the app it runs on (``core.celery_app.context_of``)."""

from __future__ import annotations

from typing import TYPE_CHECKING, cast

from celery import Task, shared_task

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
from runcast_server.core.celery_app import context_of

if TYPE_CHECKING:
    from runcast_server.alerts.needs import AlertContext


@shared_task(name=FANOUT_TASK, bind=True, acks_late=True)
def fanout_task(self: Task, alert_id: int, phase: str) -> int:
    return len(fanout(_context(self), alert_id, phase))


@shared_task(name=DELIVER_TASK, bind=True, acks_late=True)
def deliver_task(self: Task, delivery_id: int) -> str:
    return deliver(_context(self), delivery_id)


@shared_task(name=SWEEP_TASK, bind=True, acks_late=True, expires=60)
def sweep_task(self: Task) -> int:
    return sweep(_context(self))


@shared_task(name=PRUNE_TASK, bind=True, acks_late=True, expires=3600)
def prune_task(self: Task) -> int:
    return prune_deliveries(_context(self))


def _context(task: Task) -> AlertContext:
    return cast("AlertContext", context_of(task.app))
