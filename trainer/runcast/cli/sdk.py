"""The SDK's verbs (``sync``, ``import``, ``export``, ``download``) on the standard library's argparse.

They are what a training node needs after ``pip install runcast`` (no extras): recover a
spool, import other trackers' runs, export points, fetch a checkpoint. So they run with the
SDK's dependencies only (standard library, httpx); typer, rich and the server are never
imported here. ``runcast.cli.main`` sends these verbs here before anything else; the Typer
group lists them for ``runcast --help`` and forwards to the same parsers.

A verb module gives ``HELP`` (one line), ``add_arguments(parser)`` and ``run(args) -> int``
(the exit status); a bad flag raises ``UsageError`` (exit 2, the message names the flag).
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from types import ModuleType
from typing import Final, NoReturn

from runcast.cli.exits import UsageError

__all__ = ["VERBS", "UsageError", "help_line", "main", "parser_for"]


def _verbs() -> dict[str, ModuleType]:
    from runcast.cli import download, export, import_cmd, sync

    return {"sync": sync, "import": import_cmd, "export": export, "download": download}


VERBS: Final = ("sync", "import", "export", "download")


class _Defaults(argparse.ArgumentDefaultsHelpFormatter):
    """Shows an option's default, unless it has none worth showing (None, False: the option is off)."""

    def _get_help_string(self, action: argparse.Action) -> str | None:
        if action.default is None or action.default is False:
            return action.help
        return super()._get_help_string(action)


def parser_for(verb: str) -> tuple[argparse.ArgumentParser, ModuleType]:
    """The parser of one verb (``runcast VERB``) and its module."""
    module = _verbs()[verb]
    parser = argparse.ArgumentParser(
        prog=f"runcast {verb}", description=module.HELP, formatter_class=_Defaults
    )
    module.add_arguments(parser)
    return parser, module


def help_line(verb: str) -> str:
    """The verb's one-line help (for ``runcast --help``)."""
    return str(_verbs()[verb].HELP)


def main(argv: Sequence[str]) -> int:
    """Run ``runcast VERB ARGS`` for one of ``VERBS``; returns the exit status."""
    verb, *rest = argv
    parser, module = parser_for(verb)
    args = parser.parse_args(rest)  # exits 2 naming the argument on a bad one
    try:
        return int(module.run(args))
    except UsageError as exc:
        _usage_error(parser, str(exc))


def _usage_error(parser: argparse.ArgumentParser, message: str) -> NoReturn:
    parser.print_usage(sys.stderr)
    print(f"{parser.prog}: error: {message}", file=sys.stderr)
    raise SystemExit(2)
