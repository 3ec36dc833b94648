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


_open: dict[int, Finishable] = {}
_installed = False
_sigterm_installed = False
_exit_status = "finished"
_previous_excepthook = sys.excepthook
_previous_sigterm: Any = signal.SIG_DFL


def register(run: Finishable) -> None:
    """Finish ``run`` when the process ends, unless it was finished before."""
    _install()
    _open[id(run)] = run


def unregister(run: Finishable) -> None:
    """``run`` is finished: forget it."""
    _open.pop(id(run), None)


def _finish_all(status: str) -> None:
    for run in list(_open.values()):
        try:
            run.finish(status)
        except Exception:  # one run's failure must not stop the others
            log.warning("runcast: finishing a run as %r at exit failed", status, exc_info=True)


def _install() -> None:
    global _installed, _previous_excepthook
    if not _installed:
        _installed = True
        _previous_excepthook = sys.excepthook
        sys.excepthook = _excepthook
        atexit.register(_at_exit)
    if not _sigterm_installed and threading.current_thread() is threading.main_thread():
        _install_sigterm()


def _install_sigterm() -> None:
    global _sigterm_installed, _previous_sigterm
    previous = signal.getsignal(signal.SIGTERM)
    if previous in (signal.SIG_IGN, None):  # ignored, or owned by non-Python code: leave it alone
        return
    _previous_sigterm = previous
    signal.signal(signal.SIGTERM, _on_sigterm)
    _sigterm_installed = True


def _excepthook(kind: type[BaseException], value: BaseException, tb: TracebackType | None) -> None:
    global _exit_status
    _exit_status = "killed" if issubclass(kind, KeyboardInterrupt) else "failed"
    _previous_excepthook(kind, value, tb)


def _at_exit() -> None:
    _finish_all(_exit_status)


def _on_sigterm(signum: int, frame: FrameType | None) -> None:
    _finish_all("killed")
    previous = _previous_sigterm
    if callable(previous):
        previous(signum, frame)
        return
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    os.kill(os.getpid(), signal.SIGTERM)
