"""Finishing open runs when the process ends: at exit, after a crash, on SIGTERM.

* ``atexit``: open runs finish as "failed" if the interpreter is exiting because of an
  uncaught exception ("killed" for KeyboardInterrupt), else as "finished".
* ``sys.excepthook`` is wrapped (the previous hook still runs) to notice that crash.
* SIGTERM, when the first run is opened from the main thread and SIGTERM is not
  ignored: open runs finish as "killed", then the previous handler runs; if it was
  the default action, it is restored and the signal raised again, so the process
  still dies of SIGTERM.
"""

from __future__ import annotations

import atexit
import logging
import os
import signal
import sys
import threading
from types import FrameType, TracebackType
from typing import Any, Protocol

log = logging.getLogger("runcast")


class Finishable(Protocol):
    def finish(self, status: str = "finished", timeout: float | None = None) -> None: ...


class ExitHooks:
    """The process's open runs and the hooks that finish them, installed once (the atexit hook, the
    wrapped ``sys.excepthook``, the SIGTERM handler) with what they replaced."""

    def __init__(self) -> None:
        self.open: dict[int, Finishable] = {}
        self.installed = False
        self.sigterm_installed = False
        self.exit_status = "finished"  # how open runs finish at exit: "failed" after an uncaught exception
        self.previous_excepthook = sys.excepthook
        self.previous_sigterm: Any = signal.SIG_DFL

    def finish_all(self, status: str) -> None:
        for run in list(self.open.values()):
            try:
                run.finish(status)
            except Exception:  # one run's failure must not stop the others
                log.warning("runcast: finishing a run as %r at exit failed", status, exc_info=True)

    def install(self) -> None:
        if not self.installed:
            self.installed = True
            self.previous_excepthook = sys.excepthook
            sys.excepthook = self.excepthook
            atexit.register(self.at_exit)
        if not self.sigterm_installed and threading.current_thread() is threading.main_thread():
            self.install_sigterm()

    def install_sigterm(self) -> None:
        previous = signal.getsignal(signal.SIGTERM)
        if previous in (signal.SIG_IGN, None):  # ignored, or owned by non-Python code: leave it alone
            return
        self.previous_sigterm = previous
        signal.signal(signal.SIGTERM, self.on_sigterm)
        self.sigterm_installed = True

    def excepthook(self, kind: type[BaseException], value: BaseException, tb: TracebackType | None) -> None:
        self.exit_status = "killed" if issubclass(kind, KeyboardInterrupt) else "failed"
        self.previous_excepthook(kind, value, tb)

    def at_exit(self) -> None:
        self.finish_all(self.exit_status)

    def on_sigterm(self, signum: int, frame: FrameType | None) -> None:
        self.finish_all("killed")
        previous = self.previous_sigterm
        if callable(previous):
            previous(signum, frame)
            return
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
        os.kill(os.getpid(), signal.SIGTERM)


# Process-wide by nature: atexit, sys.excepthook and signal handlers belong to the process.
_hooks = ExitHooks()


def register(run: Finishable) -> None:
    """Finish ``run`` when the process ends, unless it was finished before."""
    _hooks.install()
    _hooks.open[id(run)] = run


def unregister(run: Finishable) -> None:
    """``run`` is finished: forget it."""
    _hooks.open.pop(id(run), None)
