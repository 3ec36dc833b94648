"""The reports' Celery tasks: the fan-out and delivery of report notices (``notices``). Registered
on every Runcast Celery app (``shared_task``, imported by ``runcast_server.tasks``); each runs with
the context of the app it runs on."""

from __future__ import annotations

from typing import TYPE_CHECKING, cast

from celery import Task, shared_task

from runcast_server.core.celery_app import context_of
from runcast_server.reports import notices

if TYPE_CHECKING:
    from runcast_server.alerts.needs import AlertContext


@shared_task(name=notices.FANOUT_TASK, bind=True, acks_late=True)
def report_fanout_task(self: Task, report_id: int, published_at: float) -> int:
    return len(notices.fanout(_context(self), report_id, published_at))


@shared_task(name=notices.DELIVER_TASK, bind=True, acks_late=True)
def report_deliver_task(self: Task, delivery_id: int) -> str:
    return notices.deliver(_context(self), delivery_id)


def _context(task: Task) -> AlertContext:
    return cast("AlertContext", context_of(task.app))
