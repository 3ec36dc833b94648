"""How ``runcast`` ends when a verb fails unexpectedly: one line on standard error that says what
(and which setting), a non-zero status, and the traceback only with ``--debug`` (or
``RUNCAST_DEBUG=1``). A reader that closes the pipe (``runcast export RUN | head``) ends it quietly.
Standard library only: the SDK-only verbs use it too.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable
from typing import Any, Final, NoReturn

from runcast.cli.exits import EXIT_FAILED, EXIT_USAGE

DEBUG_FLAG: Final = "--debug"
EXIT_PIPE: Final = 141  # 128 + SIGPIPE: what a Unix tool whose reader went away exits with


def debug_wanted(args: list[str]) -> bool:
    """Whether tracebacks are wanted; removes ``--debug`` from ``args`` (it may stand anywhere)."""
    wanted = DEBUG_FLAG in args
    while DEBUG_FLAG in args:
        args.remove(DEBUG_FLAG)
    return wanted or os.environ.get("RUNCAST_DEBUG", "") not in ("", "0")


def guarded(run: Callable[[], Any], verb: str | None, debug: bool) -> NoReturn:
    """Run a verb and exit with its status; an uncaught error becomes one line (``--debug``: raised)."""
    try:
        status = run()
    except BrokenPipeError:
        _quiet_pipe()
    except KeyboardInterrupt:
        print("runcast: interrupted", file=sys.stderr)
        raise SystemExit(130) from None
    except Exception as exc:  # noqa: BLE001 - the one place every verb's unexpected error ends
        if debug:
            raise
        status, line = describe(exc)
        print(f"runcast {verb or ''}: {line}".replace("runcast : ", "runcast: ")
              + f" (run again with {DEBUG_FLAG} for the traceback)", file=sys.stderr)
        raise SystemExit(status) from None
    try:
        sys.stdout.flush()
    except BrokenPipeError:
        _quiet_pipe()
    raise SystemExit(status)


def describe(exc: BaseException) -> tuple[int, str]:
    """(exit status, one line) for an error: a bad ``RUNCAST_*`` setting names the variable (exit 2)."""
    errors = getattr(exc, "errors", None)
    if type(exc).__name__ == "ValidationError" and callable(errors) and getattr(exc, "title", "") == "Settings":
        parts = []
        for error in errors():
            name = "RUNCAST_" + "_".join(str(p) for p in error.get("loc", ())).upper()
            message = str(error.get("msg", "")).removeprefix("Value error, ")
            given = error.get("input")
            if isinstance(given, str) and given not in message:
                message += f" (got {given!r})"
            parts.append(message if message.startswith(name) else f"{name}: {message}")
        return EXIT_USAGE, "; ".join(parts)
    message = " ".join(str(exc).split()) or type(exc).__name__
    return EXIT_FAILED, f"{type(exc).__name__}: {message}"


def _quiet_pipe() -> NoReturn:
    """Standard output's reader went away: stop without a word (and without Python's flush error at exit)."""
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, sys.stdout.fileno())
    raise SystemExit(EXIT_PIPE)
