"""The application context: the state a process builds once, where it starts, and passes.

Nothing in the server builds shared state on first use, and nothing is kept on a module.
The FastAPI app factory (``app.create_app``), a Celery worker's start (``tasks``) and the
CLI commands each build one ``AppContext`` from one ``Settings`` and hand it to what needs
it: routes get it from ``request.app.state.context`` (``api.deps.ContextDep``), Celery
tasks from the Celery app they run on (``context_of(self.app)``: each context has its own
app, ``celery``), plain functions as their first argument. Whoever builds a context starts
it and closes it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from runcast_server.alerts.runner import AlertRunner
from runcast_server.artifacts.backend import storage_from_settings
from runcast_server.artifacts.storage import Storage
from runcast_server.core import celery_app
from runcast_server.core.celery_app import RuncastCelery
from runcast_server.core.db import Database
from runcast_server.core.settings import Settings
from runcast_server.live.fanout import Registry
from runcast_server.live.hub import LocalHub, make_hub
from runcast_server.metrics.arrow_connections import ArrowConnections
from runcast_server.observability.prometheus import Metrics


@dataclass(frozen=True)
class AppContext:
    """One process's state (one per app in tests)."""

    settings: Settings
    database: Database  # the engine and session factory of settings.sqlalchemy_url
    hub: LocalHub  # live messages: in-process when embedded, Redis pub/sub in production
    registry: Registry  # the live stream's channels (one per run with viewers) and viewers
    storage: Storage  # where checkpoints are (local root or S3: one boto3 client, its connection pool)
    celery: RuncastCelery  # sends this process's tasks (embedded: runs them here), and runs them with this context
    metrics: Metrics | None = None  # the process's Prometheus instruments (None: nothing is recorded)
    alerts: AlertRunner | None = None  # embedded only: the notification pool and the periodic check
    arrow: ArrowConnections | None = None  # PostgreSQL: the exports' ADBC connections, kept between exports

    @classmethod
    def build(cls, settings: Settings, *, metrics: Metrics | None = None,
              celery: RuncastCelery | None = None) -> AppContext:
        """The context of ``settings``, bound to ``celery`` (a worker's app) or to a new Celery app."""
        hub = make_hub(settings)
        database = Database.open(settings.sqlalchemy_url)
        ctx = cls(
            settings=settings,
            database=database,
            hub=hub,
            registry=Registry(settings, hub, database),
            storage=storage_from_settings(settings),
            celery=celery if celery is not None else RuncastCelery(settings),
            metrics=metrics,
            alerts=AlertRunner() if settings.embedded else None,
            arrow=ArrowConnections(settings.sqlalchemy_url) if database.engine.dialect.name == "postgresql" else None,
        )
        ctx.celery.context = ctx  # its tasks run with this context (context_of)
        return ctx

    def start(self) -> AppContext:
        """Start its threads (embedded: the alert check)."""
        if self.alerts is not None:
            self.alerts.start(self)
        return self

    def close(self) -> None:
        """Stop what ``start`` started, and end what is still open (live streams: on the app's loop)."""
        self.registry.close_all()
        if self.alerts is not None:
            self.alerts.stop()
        self.hub.close()
        self.celery.close()  # its broker connections (production)
        if self.arrow is not None:
            self.arrow.close()
        self.database.engine.dispose()


def context_of(celery: Any) -> AppContext:
    """The context of the Celery app a task runs on (``task.app``)."""
    ctx: AppContext = celery_app.context_of(celery)
    return ctx
