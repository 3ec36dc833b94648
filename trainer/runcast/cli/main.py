"""The ``runcast`` console script (``runcast.cli.main:main``).

``sync``, ``import``, ``export`` and ``download`` need only the SDK's dependencies (the
standard library and httpx): they run from ``runcast.cli.sdk`` whatever else is installed.
Every other verb is a Typer command: ``train``, ``replay``, ``estimate`` and ``eval import`` of the SDK
(typer and rich: the ``cli`` extra; ``train`` also torch: ``trainer``), and the server's
(``serve``, ``worker``, ``demo``, ``db``, ``token create``, ``storage``, ``quarantine``: the
``server`` extra). Without what a verb needs, ``runcast VERB`` says which extra to install
and exits 2; ``runcast --help`` lists every verb either way.
"""

from __future__ import annotations

import importlib.util
import sys
from collections.abc import Sequence
from typing import Any, Final

from runcast.cli import sdk
from runcast.cli.failures import debug_wanted, guarded

EXTRA_OF: Final = {
    "train": "trainer", "replay": "cli", "estimate": "cli", "plot": "cli", "runs": "cli", "reports": "cli", "token": "cli", "eval": "cli",
    "serve": "server", "worker": "server", "demo": "server", "db": "server",
    "storage": "server", "quarantine": "server",
}  # fmt: skip
# What each extra brings that its verbs import (the wheel holds runcast_server; its libraries come with the extra).
NEEDS: Final = {
    "cli": ("typer", "rich"),
    "trainer": ("typer", "rich", "torch"),
    "server": ("typer", "rich", "runcast_server", "fastapi", "uvicorn", "sqlalchemy", "alembic", "celery"),
}


def missing_for(verb: str) -> str | None:
    """The first package ``verb`` needs that is not installed (None when all are)."""
    for package in NEEDS[EXTRA_OF[verb]]:
        if not installed(package):
            return package
    return None


def installed(package: str) -> bool:
    """Whether ``package`` can be imported (looked up, not imported: the server's are heavy)."""
    try:
        return importlib.util.find_spec(package) is not None
    except ImportError:
        return False


def main(argv: Sequence[str] | None = None) -> None:
    """Run ``runcast ARGS`` (``sys.argv[1:]`` by default); exits with the verb's status."""
    args = list(sys.argv[1:] if argv is None else argv)
    debug = debug_wanted(args)
    verb = args[0] if args else None
    if verb in sdk.VERBS:
        guarded(lambda: sdk.main(args), verb, debug)
    if verb in EXTRA_OF and (package := missing_for(verb)) is not None:
        extra = EXTRA_OF[verb]
        print(
            f"runcast {verb}: needs the '{extra}' extra ('{package}' is not installed): pip install 'runcast[{extra}]'",
            file=sys.stderr,
        )
        raise SystemExit(2)
    if not installed("typer"):
        raise SystemExit(_sdk_only_help(verb))
    from runcast.cli.app import app as typer_app

    guarded(lambda: typer_app(args=args, prog_name="runcast"), verb, debug)


def _sdk_only_help(verb: str | None) -> int:
    """``runcast [--help]`` (or an unknown verb) without typer: every verb, and what it needs."""
    out = sys.stdout if verb in (None, "-h", "--help") else sys.stderr
    if out is sys.stderr:
        print(f"runcast: no such command {verb!r}", file=out)
    print("usage: runcast COMMAND [ARGS]...\n\ncommands (runcast COMMAND --help for more):", file=out)
    for name in sdk.VERBS:
        print(f"  {name:<11} {sdk.help_line(name)}", file=out)
    for extra in ("cli", "trainer", "server"):
        names = ", ".join(v for v, e in EXTRA_OF.items() if e == extra)
        print(f"  {names}: pip install 'runcast[{extra}]'", file=out)
    return 0 if out is sys.stdout else 2


def __getattr__(name: str) -> Any:
    # ``runcast.cli.main.app``: the Typer group (tests drive it with typer.testing.CliRunner;
    # older installs' console script points here). Imported on use: typer may be missing.
    if name == "app":
        from runcast.cli.app import app

        return app
    raise AttributeError(name)


if __name__ == "__main__":
    main()
