"""What the alerts need of the process that runs them, as a protocol.

The application context (``runcast_server.context.AppContext``) is one; the alerts never
import it, so that the context, which owns the alerts' runner, sits above them.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from collections.abc import Callable

    from celery import Celery

    from runcast_server.core.db import Database
    from runcast_server.core.settings import Settings
    from runcast_server.observability.prometheus import Metrics


class Publisher(Protocol):
    """The live hub, as the alerts use it."""

    def publish(self, run_id: str, message: dict[str, Any]) -> None: ...


class Runner(Protocol):
    """Embedded mode's pool and timers (``alerts.runner.AlertRunner``), as the alerts use them."""

    @property
    def sweep_lock(self) -> Any: ...  # a threading.Lock: sweeps never pile up

    def submit(self, fn: Callable[..., Any], *args: Any) -> None: ...

    def later(self, delay: float, fn: Callable[..., Any], *args: Any) -> None: ...


class AlertContext(Protocol):
    """The state the alerts work with: settings, database, live hub, Celery app (production: the
    tasks it sends), metrics, and (embedded) the alert runner."""

    @property
    def settings(self) -> Settings: ...

    @property
    def database(self) -> Database: ...

    @property
    def hub(self) -> Publisher: ...

    @property
    def alerts(self) -> Runner | None: ...

    @property
    def celery(self) -> Celery: ...

    @property
    def metrics(self) -> Metrics | None: ...
