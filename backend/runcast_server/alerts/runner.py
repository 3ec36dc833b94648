"""Embedded mode's alert machinery, owned by the application context: the thread pool that
runs fan-out and deliveries (so an ingest request never waits for a webhook), timers for
retries, and the periodic check (stalls, quiet restart loops, delivery pruning).

Production has none of it: Celery workers run the tasks and beat sends the checks.
Started and stopped by whoever built the context (the FastAPI lifespan, ``runcast demo``).
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from runcast_server.alerts.needs import AlertContext

log = logging.getLogger(__name__)


class AlertRunner:
    """The pool, the retry timers and the periodic-check thread of one embedded process."""

    def __init__(self, workers: int = 4) -> None:
        self.pool = ThreadPoolExecutor(max_workers=workers, thread_name_prefix="runcast-alerts")
        self.sweep_lock = threading.Lock()  # sweeps never pile up (production: a Redis lock)
        self._stop = threading.Event()
        self._timers: set[threading.Timer] = set()
        self._timers_lock = threading.Lock()
        self._thread: threading.Thread | None = None

    def submit(self, fn: Callable[..., Any], *args: Any) -> None:
        """Run ``fn(*args)`` on the pool; an error is logged, never raised."""
        if self._stop.is_set():
            return
        try:
            self.pool.submit(_guard, fn, *args)
        except RuntimeError:  # stopped meanwhile
            log.info("alerts: %s%r not run: the server is stopping", getattr(fn, "__name__", fn), args)

    def later(self, delay: float, fn: Callable[..., Any], *args: Any) -> None:
        """Run ``fn(*args)`` on the pool after ``delay`` seconds (a retry)."""
        def fire() -> None:
            with self._timers_lock:
                self._timers.discard(timer)
            self.submit(fn, *args)

        timer = threading.Timer(delay, fire)
        timer.daemon = True
        with self._timers_lock:
            self._timers.add(timer)
        timer.start()

    def start(self, ctx: AlertContext) -> AlertRunner:
        """Start the periodic check (every ``alert_check_interval_s``) for ``ctx``."""
        if self._thread is None:
            self._thread = threading.Thread(target=self._loop, args=(ctx,), name="runcast-alert-sweep", daemon=True)
            self._thread.start()
        return self

    def stop(self) -> None:
        """Stop the check and the pending retries; deliveries already running finish."""
        self._stop.set()
        with self._timers_lock:
            for timer in self._timers:
                timer.cancel()
            self._timers.clear()
        if self._thread is not None:
            self._thread.join(timeout=10)
        self.pool.shutdown(wait=False)  # what is queued still runs

    def _loop(self, ctx: AlertContext) -> None:
        from runcast_server.alerts.notify import prune_deliveries
        from runcast_server.alerts.stall import sweep

        settings = ctx.settings
        pruned_at = 0.0
        while not self._stop.wait(settings.alert_check_interval_s):
            try:
                sweep(ctx)
            except Exception:
                log.exception("alerts: periodic check failed")
            if time.monotonic() - pruned_at >= settings.delivery_prune_interval_s:
                pruned_at = time.monotonic()
                try:
                    prune_deliveries(ctx)
                except Exception:
                    log.exception("alerts: pruning deliveries failed")


def _guard(fn: Any, *args: Any) -> None:
    try:
        fn(*args)
    except Exception:
        log.exception("alerts: %s%r failed", getattr(fn, "__name__", fn), args)
