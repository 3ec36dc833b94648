"""The Celery app "runcast": one per process (one per API app in tests), made from settings.

Production (``RUNCAST_REDIS_URL`` set): Redis is the broker and tasks run in
``runcast worker`` processes. Embedded: tasks run eagerly in the calling process
and their errors propagate to the caller.

Nothing here is process-wide. ``RuncastCelery(settings)`` is made where a process
builds its application context (``context.AppContext.build``: the API's app factory,
the CLI's commands) or starts a worker (``runcast worker``); the context binds itself to
its app (``RuncastCelery.context``) and the tasks, registered on every app (Celery's
``shared_task``), read it from the app they run on. A bare ``celery -A
runcast_server.core.celery_app worker|beat`` asks this module for ``app``: a new app from
the environment's settings (``Settings()``, read then), whose worker builds its context
at start (``tasks``).
"""

from __future__ import annotations

from typing import Any, Final
from urllib.parse import urlsplit

from celery import Celery, bootsteps

from runcast_server.core.settings import Settings

# kombu's Redis transport, dropping a queue entry that is not a kombu message instead of ending the worker.
REDIS_TRANSPORT: Final = "runcast_server.core.broker_transport:Transport"
# The modules whose tasks a worker imports at start.
TASK_MODULES: Final = ("runcast_server.tasks", "runcast_server.alerts.tasks", "runcast_server.reports.tasks")


class _OwnAppInThisThread(bootsteps.StartStopStep):
    """The consumer's thread resolves tasks with the worker's own app: Celery's worker looks a task
    up on the thread's current app (else the process's default one, the last app made current), so
    a second worker in the process would otherwise run this worker's messages with its app."""

    def start(self, parent: Any) -> None:
        parent.app.set_current()


class RuncastCelery(Celery):
    """A Celery app configured from ``settings``, with the application context its tasks run with."""

    settings: Settings
    context: Any = None  # the process's context.AppContext, set by AppContext.build (a worker: at its start)

    def __init__(self, settings: Settings) -> None:
        # Every task's messages are screened before the worker decodes them (core.screened_task).
        super().__init__("runcast", task_cls="runcast_server.core.screened_task:ScreenedTask",
                         include=list(TASK_MODULES), set_as_current=False)
        self.settings = settings
        self.conf.update(config(settings))
        self.steps["consumer"].add(_OwnAppInThisThread)


def config(settings: Settings) -> dict[str, Any]:
    """The Celery configuration of ``settings``."""
    return dict(
        broker_url=settings.redis_url or "memory://",
        broker_transport=REDIS_TRANSPORT if urlsplit(settings.redis_url or "").scheme in ("redis", "rediss") else None,
        result_backend=None,
        task_ignore_result=True,
        task_always_eager=settings.embedded,
        task_eager_propagates=True,
        task_serializer="json",
        accept_content=["json"],
        result_serializer="json",
        task_acks_late=True,
        task_reject_on_worker_lost=True,
        worker_prefetch_multiplier=1,
        broker_connection_retry_on_startup=True,
        broker_transport_options={
            "visibility_timeout": settings.broker_visibility_timeout_s,
            "socket_connect_timeout": 5,
            "socket_timeout": 30,
        },
        # Fail fast when the broker is down: the API answers 503 and the SDK spools.
        task_publish_retry_policy={"max_retries": 2, "interval_start": 0, "interval_step": 0.5, "interval_max": 1},
        worker_hijack_root_logger=False,
        # Periodic tasks (`runcast worker --beat`, or `celery -A runcast_server.core.celery_app beat`):
        # the alerts' checks (stalls, quiet restart loops; delivery pruning) and the ingest
        # inbox sweeper.
        beat_schedule={
            "runcast-alerts-sweep": {
                "task": "runcast.alerts.sweep",
                "schedule": settings.alert_check_interval_s,
                "options": {"expires": settings.alert_check_interval_s},
            },
            # Finished notification deliveries older than RUNCAST_DELIVERY_RETENTION_S.
            "runcast-alerts-prune": {
                "task": "runcast.alerts.prune",
                "schedule": settings.delivery_prune_interval_s,
                "options": {"expires": settings.delivery_prune_interval_s},
            },
            "runcast-inbox-sweep": {
                "task": "runcast.inbox.sweep",
                "schedule": settings.inbox_sweep_interval_s,
                "options": {"expires": settings.inbox_sweep_interval_s},
            },
        },
    )


def settings_of(celery: Celery) -> Settings:
    """The settings ``celery`` was made from."""
    if not isinstance(celery, RuncastCelery):
        raise TypeError(f"not a Runcast Celery app: {celery!r} (make one with RuncastCelery(settings))")
    return celery.settings


def context_of(celery: Celery) -> Any:
    """The application context bound to ``celery`` (``context.context_of`` types it)."""
    ctx = getattr(celery, "context", None)
    if ctx is None:
        raise RuntimeError("no application context on this Celery app: build one with "
                           "context.AppContext.build(settings, celery=app) where the process starts")
    return ctx


def __getattr__(name: str) -> RuncastCelery:
    """``celery -A runcast_server.core.celery_app[:app] worker|beat|inspect``: a new app, made from the
    environment's settings when Celery asks for it (nothing is kept here)."""
    if name in ("app", "celery"):
        return RuncastCelery(Settings())
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
