"""The ``runcast`` console script (``runcast.cli.main:app``).

The command line needs typer and rich (the ``cli`` extra; the ``server`` and ``trainer``
extras include it). An install without them gets one line naming the missing package and
exit status 2, not a traceback: ``import runcast`` itself never needs them.
"""

from __future__ import annotations

import importlib
import sys
from collections.abc import Callable
from typing import Any, NoReturn

CLI_PACKAGES = ("typer", "rich")


def missing_cli_package() -> str | None:
    """The first package of the ``cli`` extra (or one it needs) that cannot be imported."""
    for package in CLI_PACKAGES:
        try:
            importlib.import_module(package)
        except ModuleNotFoundError as exc:
            return (exc.name or package).partition(".")[0]
    return None


def missing_package(package: str) -> Callable[[], NoReturn]:
    """A stand-in for the command line that says which package to install, and fails."""

    def run() -> NoReturn:
        print(
            f"runcast: the command line needs the '{package}' package, which is not installed: "
            "pip install 'runcast[cli]'",
            file=sys.stderr,
        )
        raise SystemExit(2)

    return run


app: Callable[[], Any]
if (missing := missing_cli_package()) is None:
    from runcast.cli.app import app
else:
    app = missing_package(missing)


def main() -> None:
    app()


if __name__ == "__main__":
    main()
