"""The application context: the state a process builds once, where it starts, and passes.

Nothing in the server builds shared state on first use. The FastAPI lifespan
(``app.create_app``), the Celery worker's start (``tasks``) and the CLI commands each
build one ``AppContext`` from one ``Settings`` and hand it to what needs it: routes get
it from ``request.app.state.context`` (``api.deps.ContextDep``), Celery tasks from the
Celery app it is bound to (``context_of``), plain functions as their first argument.
Whoever builds a context starts it and closes it.
"""

from __future__ import annotations

from dataclasses import dataclass

from runcast_server.alerts.runner import AlertRunner
from runcast_server.artifacts.backend import storage_from_settings
from runcast_server.artifacts.storage import Storage
from runcast_server.core.celery_app import bind_context, context_of, unbind_context
from runcast_server.core.db import Database
from runcast_server.core.settings import Settings
from runcast_server.live.fanout import Registry
from runcast_server.live.hub import LocalHub, make_hub


@dataclass(frozen=True)
class AppContext:
    """One process's state (one per app in tests)."""

    settings: Settings
    database: Database  # the engine and session factory of settings.sqlalchemy_url
    hub: LocalHub  # live messages: in-process when embedded, Redis pub/sub in production
    registry: Registry  # the live stream's channels (one per run with viewers) and viewers
    storage: Storage  # where checkpoints are (local root or S3: one boto3 client, its connection pool)
    alerts: AlertRunner | None = None  # embedded only: the notification pool and the periodic check

    @classmethod
    def build(cls, settings: Settings) -> AppContext:
        hub = make_hub(settings)
        database = Database.open(settings.sqlalchemy_url)
        return cls(
            settings=settings,
            database=database,
            hub=hub,
            registry=Registry(settings, hub, database),
            storage=storage_from_settings(settings),
            alerts=AlertRunner() if settings.embedded else None,
        )

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
        self.database.engine.dispose()



__all__ = ["AppContext", "bind_context", "context_of", "unbind_context"]
