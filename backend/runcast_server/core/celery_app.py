"""The Celery app "runcast", configured from settings.

Production (``RUNCAST_REDIS_URL`` set): Redis is the broker and tasks run in
``runcast worker`` processes. Embedded: tasks run eagerly in the calling process
and their errors propagate to the caller.

Importing this module configures nothing. Whoever starts the process configures the
app from the settings it built (``configure``: ``runcast worker``, the API's app
factory, the CLI's commands). A bare ``celery -A runcast_server.core.celery_app
worker|beat`` configures nobody: when Celery first reads the app's configuration
(its ``on_configure`` signal) the app configures itself from ``Settings()``, read
from the environment then, once.
"""

from __future__ import annotations

from typing import Any, Final
from urllib.parse import urlsplit

from celery import Celery

from runcast_server.core.settings import Settings

# kombu's Redis transport, dropping a queue entry that is not a kombu message instead of ending the worker.
REDIS_TRANSPORT: Final = "runcast_server.core.broker_transport:Transport"
# Every task's messages are screened before the worker decodes them (core.screened_task).
app = Celery("runcast", task_cls="runcast_server.core.screened_task:ScreenedTask",
             include=["runcast_server.tasks", "runcast_server.alerts.tasks"])


def configure(settings: Settings) -> Celery:
    """Apply ``settings`` to the app; returns the app. ``settings_of(app)`` is then ``settings``."""
    app.runcast_settings = settings  # read back by settings_of
    app.conf.update(
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
    return app


def settings_of(celery: Celery) -> Settings:
    """The settings ``celery`` was configured from (configuring it from ``Settings()`` if nobody did)."""
    settings: Settings | None = getattr(celery, "runcast_settings", None)
    if settings is None:
        celery.conf.get("broker_url")  # the first read of the configuration: _configure_if_unconfigured
        settings = celery.runcast_settings
    return settings


def app_for(settings: Settings) -> Celery:
    """The app, configured from ``settings`` (again only when they are other settings)."""
    if getattr(app, "runcast_settings", None) is not settings:
        configure(settings)
    return app


@app.on_configure.connect
def _configure_if_unconfigured(sender: Celery, **_: Any) -> None:
    """Celery reads the app's configuration for the first time: when no one configured it (a bare
    ``celery -A runcast_server.core.celery_app worker|beat``), its settings are the environment's."""
    if getattr(sender, "runcast_settings", None) is None:
        configure(Settings())


def bind_context(owner: Any, ctx: Any) -> None:
    """Hand ``ctx`` to ``owner`` (the Celery app: its tasks read it there, see ``context_of``)."""
    owner.runcast_context = ctx


def unbind_context(owner: Any, ctx: Any) -> None:
    """Take ``ctx`` back from ``owner`` when it is still the one bound (its app stopped)."""
    if getattr(owner, "runcast_context", None) is ctx:
        owner.runcast_context = None


def context_of(owner: Any) -> Any:
    """The context bound to ``owner`` by the process's start (worker start, app lifespan, CLI)."""
    ctx = getattr(owner, "runcast_context", None)
    if ctx is None:
        raise RuntimeError("no application context bound: build one with context.AppContext.build(settings) where the "
                           "process starts and bind it (bind_context)")
    return ctx
