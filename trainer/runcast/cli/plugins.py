"""Verbs other packages add to ``runcast``: the ``runcast.cli_plugins`` entry-point group.

Each entry point names a callable taking the Typer group (``runcast_server.cli:register``
adds the server's verbs). An installed distribution declares its entry points in its
metadata. A source checkout run through ``PYTHONPATH``, or an editable install made before
a plugin was declared, has them only in ``pyproject.toml``: that file is read as well when
this package sits in a checkout of the ``runcast`` project.
"""

from __future__ import annotations

import logging
import tomllib
from importlib import metadata
from pathlib import Path

import typer

GROUP = "runcast.cli_plugins"
# trainer/runcast/cli/plugins.py -> the checkout's root.
CHECKOUT_PYPROJECT = Path(__file__).resolve().parents[3] / "pyproject.toml"

log = logging.getLogger("runcast")


def checkout_entry_points(pyproject: Path = CHECKOUT_PYPROJECT) -> list[metadata.EntryPoint]:
    """The group's entry points declared by the ``runcast`` checkout this package lives in."""
    if not pyproject.is_file():
        return []
    try:
        project = tomllib.loads(pyproject.read_text(encoding="utf-8")).get("project", {})
    except (OSError, tomllib.TOMLDecodeError) as exc:
        log.debug("runcast: not reading CLI plugins from %s: %s", pyproject, exc)
        return []
    if project.get("name") != "runcast":
        return []
    declared = project.get("entry-points", {}).get(GROUP, {})
    return [metadata.EntryPoint(name, value, GROUP) for name, value in declared.items()]


def plugin_entry_points() -> list[metadata.EntryPoint]:
    """Installed entry points of the group, and the checkout's; the installed one wins a name."""
    found = {ep.name: ep for ep in checkout_entry_points()}
    found.update({ep.name: ep for ep in metadata.entry_points(group=GROUP)})
    return [found[name] for name in sorted(found)]


def register_plugins(app: typer.Typer) -> None:
    """Let every plugin add its verbs to ``app``; one whose module is not installed is skipped."""
    for entry_point in plugin_entry_points():
        try:
            register = entry_point.load()
        except ModuleNotFoundError as exc:
            # Only the plugin's own module missing (a checkout run with the SDK alone on the
            # path) is skipped; a plugin that is there but lacks a dependency fails loudly.
            if exc.name is None or not (entry_point.module + ".").startswith(exc.name + "."):
                raise
            log.debug("runcast: CLI plugin %s skipped: %s is not installed", entry_point.name, exc.name)
            continue
        register(app)
