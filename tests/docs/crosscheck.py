"""The docs held against the code in both directions: every command, flag, setting and route a doc
names exists, and every one that exists is documented (commands and flags in docs/cli.md, settings
in docs/configuration.md with their defaults, routes with their method in some doc).

``problems(docs, inventory)`` takes the texts and the code's inventory, so a test can plant
an undocumented setting or a flag that does not exist and see it reported.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping

from docs import mentions
from docs.inventory import GLOBAL_FLAGS, Inventory

CLI_DOC = "docs/cli.md"
SETTINGS_DOC = "docs/configuration.md"
API_PREFIX = "/api/v1"
# Flags of other programs that the prose names on their own (the repository's scripts are read).
OTHER_FLAGS = {"--strict-markers": "pytest", "--rdzv-id": "torchrun"}


def problems(docs: Mapping[str, str], inventory: Inventory, script_flags: Iterable[str] = ()) -> list[str]:
    """Every disagreement, one line each naming the doc (or the code) and the name."""
    code = {doc: mentions.code_texts(doc, text) for doc, text in docs.items()}
    return [
        *_commands_named(code, inventory),
        *_flags_named(docs, inventory, set(script_flags)),
        *_commands_documented(docs.get(CLI_DOC, ""), inventory),
        *_settings_named(docs, inventory),
        *_settings_documented(docs.get(SETTINGS_DOC, ""), inventory),
        *_routes_named(docs, inventory),
        *_routes_documented(docs, inventory),
    ]


# --- commands and flags ---------------------------------------------------------------------------


def resolve(words: tuple[str, ...], inventory: Inventory) -> tuple[str | None, str | None]:
    """(the command the words name, or None; the first word that names no command, or None).

    ``a|b`` names each of its alternatives (the last one is followed on)."""
    path: list[str] = []
    for word in words:
        options = word.split("|")
        known = [
            " ".join([*path, w]) in inventory.commands or " ".join([*path, w]) in inventory.groups for w in options
        ]
        if all(known):
            path.append(options[-1])
            continue
        if not path or " ".join(path) in inventory.groups:
            return None, " ".join([*path, options[known.index(False)]])
        break  # a leaf command's positional arguments
    return " ".join(path), None


def _commands_named(code: Mapping[str, list[str]], inventory: Inventory) -> list[str]:
    found = []
    for doc, texts in code.items():
        for text in texts:
            for command in mentions.commands(text):
                if not command.words:
                    unknown = [f for f in command.flags if f not in GLOBAL_FLAGS]
                    found += [f"{doc}: `{command.text}`: runcast has no flag {f}" for f in unknown]
                    continue
                path, unknown_word = resolve(command.words, inventory)
                if unknown_word is not None:
                    found.append(f"{doc}: `{command.text}`: there is no command `runcast {unknown_word}`")
                    continue
                flags = inventory.commands.get(path or "", frozenset()) | GLOBAL_FLAGS
                found += [
                    f"{doc}: `{command.text}`: `runcast {path}` has no flag {f}"
                    for f in command.flags
                    if f not in flags
                ]
    return found


def _flags_named(docs: Mapping[str, str], inventory: Inventory, script_flags: set[str]) -> list[str]:
    """A flag written alone in the prose (`--steps N`) must be some command's, a script's or a named tool's."""
    known = set().union(*inventory.commands.values()) | GLOBAL_FLAGS | script_flags | set(OTHER_FLAGS)
    found = []
    for doc, text in docs.items():
        for span in mentions.prose_spans(text):
            for flag in re.findall(r"(?<![\w-])--[A-Za-z][A-Za-z0-9-]*", span.split(" ")[0]):
                if flag not in known:
                    found.append(f"{doc}: `{span}`: no command or script has the flag {flag}")
    return found


def _commands_documented(cli_text: str, inventory: Inventory) -> list[str]:
    """Every command, and each of its flags, in docs/cli.md: on a ``runcast COMMAND ...`` line, or in
    the code of a section whose heading names the command."""
    named: dict[str, set[str]] = {}
    for section in re.split(r"^(?=#+ )", cli_text, flags=re.M):
        heading, _, body = section.partition("\n")
        for command in mentions.commands(heading):
            path, unknown = resolve(command.words, inventory)
            if path and unknown is None:
                code = " ".join(mentions.code_texts(CLI_DOC, body))
                named.setdefault(path, set()).update(re.findall(r"(?<![\w-])--?[A-Za-z][A-Za-z0-9-]*", code))
        for text in mentions.code_texts(CLI_DOC, section):
            for command in mentions.commands(text):
                path, unknown = resolve(command.words, inventory)
                if path and unknown is None:
                    named.setdefault(path, set()).update(command.flags)
    found = []
    for group in sorted(inventory.groups):
        if not any(path.startswith(group + " ") for path in named):
            found.append(f"{CLI_DOC}: `runcast {group}` is not documented")
    for path, flags in sorted(inventory.commands.items()):
        if path not in named:
            found.append(f"{CLI_DOC}: `runcast {path}` is not documented")
            continue
        found += [
            f"{CLI_DOC}: `runcast {path} {flag}` is not documented"
            for flag in sorted(flags - named[path] - GLOBAL_FLAGS)
        ]
    return found


# --- settings ---------------------------------------------------------------------------------


def _settings_named(docs: Mapping[str, str], inventory: Inventory) -> list[str]:
    known = set(inventory.settings) | inventory.other_names
    found = []
    for doc, text in docs.items():
        for name in sorted(mentions.settings(text)):
            exists = any(k.startswith(name) for k in known) if name.endswith("_") else name in known
            if not exists:
                found.append(f"{doc}: {name}{'*' if name.endswith('_') else ''} is no setting of the server or the SDK")
    return found


def _settings_documented(text: str, inventory: Inventory) -> list[str]:
    """Each setting has a row in docs/configuration.md whose default agrees with the code's."""
    rows = {m[1]: m[2] for m in re.finditer(r"^\| `([A-Z][A-Z0-9_]+)` \| ([^|]*) \|", text, re.M)}
    found = []
    for name, default in sorted(inventory.settings.items()):
        if name not in rows:
            found.append(f"{SETTINGS_DOC}: {name} has no row")
        elif default is not None and not _same_default(rows[name], default):
            found.append(
                f"{SETTINGS_DOC}: {name}: the table says {rows[name].strip()}, the code's default is {default!r}"
            )
    return found


def _same_default(cell: str, default: object) -> bool:
    span = re.search(r"`([^`]*)`", cell)
    written = span[1] if span else cell.strip()
    if isinstance(default, bool):
        return written.lower() == str(default).lower()
    if isinstance(default, int | float):
        try:
            return float(written.replace(",", "")) == float(default)
        except ValueError:
            return False
    return written == str(default) or (default == "" and written in ("", "empty"))


# --- routes ---------------------------------------------------------------------------------


def _matches(path: str, template: str, prefix: bool = False) -> bool:
    """Whether a path as a doc writes it (a template, an example, ``/runs/{id}`` under /api/v1) is this
    route's; with ``prefix``, or a trailing ``…``, whether it leads to this route."""
    for candidate in {path, path if path.startswith(API_PREFIX) else API_PREFIX + path}:
        written = candidate.rstrip("…/").split("/") if prefix or candidate.endswith("…") else None
        segments, wanted = template.split("/"), written or candidate.split("/")
        if (len(wanted) <= len(segments) if written else len(wanted) == len(segments)) and all(
            _segment(a, b) for a, b in zip(wanted, segments)
        ):
            return True
    return False


def _segment(written: str, template: str) -> bool:
    """One path segment against a template's: a ``{param}`` on either side stands for any value."""

    def pattern(segment: str) -> str:
        return re.sub(r"\\\{[^}]*\\\}", "[^/]+", re.escape(segment))

    return bool(re.fullmatch(pattern(template), written) or re.fullmatch(pattern(written), template))


def _routes_named(docs: Mapping[str, str], inventory: Inventory) -> list[str]:
    found = []
    for doc, text in docs.items():
        for method, path in sorted(mentions.routes(text)):
            if not any(method in ("*", m) and _matches(path, t, prefix=method == "*") for m, t in inventory.routes):
                found.append(f"{doc}: {'' if method == '*' else method + ' '}{path} is no route of the server")
    return found


def _routes_documented(docs: Mapping[str, str], inventory: Inventory) -> list[str]:
    named = {mention for text in docs.values() for mention in mentions.routes(text) if mention[0] != "*"}
    found = []
    for method, template in sorted(inventory.routes):
        if not any(m == method and _matches(path, template) for m, path in named):
            found.append(f"{method} {template} is documented nowhere (`{method} {template}` in a doc)")
    return found
