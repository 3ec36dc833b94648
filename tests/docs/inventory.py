"""What the code offers, read from the code itself: the ``runcast`` commands and their flags,
the ``RUNCAST_*`` settings of the server and the SDK, and the HTTP routes of the app."""

from __future__ import annotations

import ast
import re
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

from docs.markdown import ROOT

# Flags every verb takes: the group's own, and --debug, which runcast.cli.failures takes anywhere.
GLOBAL_FLAGS = frozenset({"--help", "-h", "--debug", "--install-completion", "--show-completion"})
_NAME = re.compile(r"RUNCAST_[A-Z0-9_]*[A-Z0-9]")


@dataclass(frozen=True)
class Inventory:
    """The code's side: every name a doc may use, and must describe."""

    commands: dict[str, frozenset[str]]  # "runs list" -> its flags ("--project", "--help", ...)
    groups: frozenset[str]  # "runs", "token", ...: commands of commands
    settings: dict[str, object]  # RUNCAST_* (and PROMETHEUS_MULTIPROC_DIR) -> default (None: not a literal)
    routes: frozenset[tuple[str, str]]  # ("GET", "/api/v1/runs/{run_id}")
    other_names: frozenset[str] = field(default=frozenset())  # RUNCAST_* of deploy files and tests


def read() -> Inventory:
    """The inventory of this checkout."""
    leaves, groups = commands()
    return Inventory(leaves, groups, {**server_settings(), **sdk_settings()}, routes(), other_names())


def commands() -> tuple[dict[str, frozenset[str]], frozenset[str]]:
    """Every command of ``runcast`` (the Typer group with its plugins, and the argparse verbs) with its
    flags, and the groups of commands."""
    import typer.main
    from runcast.cli import sdk
    from runcast.cli.app import app

    found: dict[str, frozenset[str]] = {}
    groups: set[str] = set()

    def walk(command: object, path: tuple[str, ...]) -> None:
        subcommands = getattr(command, "commands", None)
        if subcommands is not None:
            groups.add(" ".join(path))
            for name, sub in subcommands.items():
                walk(sub, (*path, name))
            return
        flags = {
            opt
            for p in getattr(command, "params", ())
            if p.param_type_name == "option"
            for opt in (*p.opts, *p.secondary_opts)
        }
        found[" ".join(path)] = frozenset(flags | {"--help"})

    walk(typer.main.get_command(app), ())
    for verb in sdk.VERBS:
        parser, _ = sdk.parser_for(verb)
        found[verb] = frozenset(opt for action in parser._actions for opt in action.option_strings)
    groups.discard("")
    return found, frozenset(groups)


def server_settings() -> dict[str, object]:
    """The server's settings (``runcast_server.core.settings.Settings``) by environment variable."""
    from pydantic_core import PydanticUndefined
    from runcast_server.core.settings import Settings

    prefix = Settings.model_config.get("env_prefix", "")
    found: dict[str, object] = {}
    for name, info in Settings.model_fields.items():
        alias = info.validation_alias
        env = alias if isinstance(alias, str) else f"{prefix}{name}".upper()
        found[env] = None if info.default is PydanticUndefined else info.default
    return found


def sdk_settings() -> dict[str, object]:
    """The ``RUNCAST_*`` variables the SDK and its commands read: every such string in trainer/runcast."""
    names: set[str] = set()
    for path in (ROOT / "trainer" / "runcast").rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Constant) and isinstance(node.value, str) and _NAME.fullmatch(node.value):
                names.add(node.value)
    return dict.fromkeys(sorted(names))


def routes() -> frozenset[tuple[str, str]]:
    """Every (method, path template) the app answers, included routers flattened."""
    from fastapi.routing import APIRoute, iter_route_contexts
    from runcast_server.app import create_app
    from runcast_server.core.settings import Settings

    with tempfile.TemporaryDirectory() as tmp:
        app = create_app(Settings(data_dir=Path(tmp)))  # built, never started
    found = set()
    for context in iter_route_contexts(app.routes):
        if isinstance(context.original_route, APIRoute) and context.path_format is not None:
            found |= {(method, context.path_format) for method in context.original_route.methods or ()}
    return frozenset(found)


def other_names() -> frozenset[str]:
    """``RUNCAST_*`` names defined outside the product: substituted into the deployment files
    (``${RUNCAST_HTTP_PORT:-8000}`` in docker-compose.yml, the nginx template) or read by the tests."""
    names: set[str] = set()
    for path in [ROOT / "docker-compose.yml", *(ROOT / "deploy").rglob("*")]:
        if path.is_file():
            names |= set(re.findall(r"\$\{(RUNCAST_[A-Z0-9_]+)", path.read_text(errors="replace")))
    for path in (ROOT / "tests").rglob("*.py"):
        names |= _environment_reads(ast.parse(path.read_text()))
    return frozenset(names)


def _environment_reads(tree: ast.AST) -> set[str]:
    """The RUNCAST_* names read as ``os.environ.get(NAME)``, ``os.getenv(NAME)`` or ``os.environ[NAME]``."""
    names = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr in ("get", "getenv"):
            arg = node.args[0] if node.args else None
        elif isinstance(node, ast.Subscript) and isinstance(node.ctx, ast.Load):
            arg = node.slice
        else:
            continue
        if isinstance(arg, ast.Constant) and isinstance(arg.value, str) and _NAME.fullmatch(arg.value):
            names.add(arg.value)
    return names


def script_flags() -> frozenset[str]:
    """The flags of the repository's own scripts (bench/, scripts/), which the docs name too."""
    flags: set[str] = set()
    for path in [*(ROOT / "bench").rglob("*.py"), *(p for p in (ROOT / "scripts").iterdir() if p.is_file())]:
        flags |= set(re.findall(r"""["'](--[A-Za-z][A-Za-z0-9-]*)["']""", path.read_text(errors="replace")))
    return frozenset(flags)
