"""Verbs other packages add to ``runcast``: the ``runcast.cli_plugins`` entry-point group.

Each entry point names a callable taking the Typer group (``runcast_server.cli:register``
adds the server's verbs), read from the installed distributions' metadata: after adding a
plugin to ``pyproject.toml``, reinstall (``scripts/install``) so the metadata has it.
"""

from __future__ import annotations

import logging
from importlib import metadata

import typer

GROUP = "runcast.cli_plugins"

log = logging.getLogger("runcast")


def register_plugins(app: typer.Typer) -> None:
    """Let every plugin add its verbs to ``app``; one whose module is not installed is skipped."""
    for entry_point in sorted(metadata.entry_points(group=GROUP), key=lambda ep: ep.name):
        try:
            register = entry_point.load()
        except ModuleNotFoundError as exc:
            # Only the plugin's own module missing (the SDK alone on the path) is skipped; a
            # plugin that is there but lacks a dependency fails loudly.
            if exc.name is None or not (entry_point.module + ".").startswith(exc.name + "."):
                raise
            log.debug("runcast: CLI plugin %s skipped: %s is not installed", entry_point.name, exc.name)
            continue
        register(app)
