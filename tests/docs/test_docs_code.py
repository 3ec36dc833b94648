"""The docs against the code, both ways (tests/docs/crosscheck.py): every ``runcast`` command and
flag, ``RUNCAST_*`` setting and HTTP route a doc names exists, and every one that exists is
documented: commands and flags in docs/cli.md, settings (with their defaults) in
docs/configuration.md, routes with their method. The checker is shown to fail on a planted
undocumented setting, a planted flag that does not exist, and the rest."""

from __future__ import annotations

import dataclasses
from functools import cache

import pytest

from docs import crosscheck, inventory
from docs.inventory import Inventory
from docs.markdown import ROOT, doc_paths


@cache
def _real() -> tuple[dict[str, str], Inventory, frozenset[str]]:
    docs = {doc: (ROOT / doc).read_text() for doc in doc_paths()}
    return docs, inventory.read(), inventory.script_flags()


def _problems(docs: dict[str, str] | None = None, inv: Inventory | None = None) -> list[str]:
    real_docs, real_inv, flags = _real()
    return crosscheck.problems(real_docs if docs is None else docs, real_inv if inv is None else inv, flags)


def _with(doc: str, text: str) -> dict[str, str]:
    docs = dict(_real()[0])
    docs[doc] = docs[doc] + "\n" + text + "\n"
    return docs


def test_the_docs_and_the_code_agree() -> None:
    problems = _problems()
    assert not problems, "\n".join(problems)


def test_the_inventory_is_read_from_the_code() -> None:
    _, inv, _ = _real()
    assert {"serve", "token create", "runs list", "sync", "import"} <= set(inv.commands)  # plugins and argparse verbs
    assert "--retry-refused" in inv.commands["sync"] and "--delay-s" in inv.commands["runs policy"]
    assert {"RUNCAST_WEBHOOK_TIMEOUT_S", "RUNCAST_MIN_FREE_BYTES", "RUNCAST_SPOOL_DIR", "RUNCAST_PROJECT"} <= set(
        inv.settings
    )
    assert ("PUT", "/api/v1/runs/{run_id}/segments/{segment}/spool") in inv.routes


def test_a_planted_undocumented_setting_fails() -> None:
    _, inv, _ = _real()
    planted = dataclasses.replace(inv, settings={**inv.settings, "RUNCAST_PLANTED_S": 5})
    assert _problems(inv=planted) == [f"{crosscheck.SETTINGS_DOC}: RUNCAST_PLANTED_S has no row"]


def test_a_default_the_code_changed_fails() -> None:
    _, inv, _ = _real()
    changed = dataclasses.replace(inv, settings={**inv.settings, "RUNCAST_STALL_AFTER_S": 900})
    assert _problems(inv=changed) == [
        f"{crosscheck.SETTINGS_DOC}: RUNCAST_STALL_AFTER_S: the table says `600`, the code's default is 900"
    ]


def test_a_planted_setting_the_code_lacks_fails() -> None:
    assert _problems(_with("docs/sdk.md", "Set `RUNCAST_NO_SUCH_SETTING=1`.")) == [
        "docs/sdk.md: RUNCAST_NO_SUCH_SETTING is no setting of the server or the SDK"
    ]


@pytest.mark.parametrize(
    ("text", "problem"),
    [
        (
            "```sh\nruncast export RUN --no-such-flag\n```",
            "docs/api.md: `runcast export RUN --no-such-flag`: `runcast export` has no flag --no-such-flag",
        ),
        (
            "Pass `--no-such-flag` to it.",
            "docs/api.md: `--no-such-flag`: no command or script has the flag --no-such-flag",
        ),
        (
            "Run `runcast runs frobnicate RUN`.",
            "docs/api.md: `runcast runs frobnicate RUN`: there is no command `runcast runs frobnicate`",
        ),
        ("Run `runcast frobnicate`.", "docs/api.md: `runcast frobnicate`: there is no command `runcast frobnicate`"),
    ],
    ids=["flag-on-a-command-line", "flag-in-prose", "subcommand", "command"],
)
def test_a_planted_flag_or_command_that_does_not_exist_fails(text: str, problem: str) -> None:
    assert _problems(_with("docs/api.md", text)) == [problem]


def test_an_undocumented_flag_fails() -> None:
    _, inv, _ = _real()
    planted = dataclasses.replace(inv, commands={**inv.commands, "sync": inv.commands["sync"] | {"--planted"}})
    assert _problems(inv=planted) == [f"{crosscheck.CLI_DOC}: `runcast sync --planted` is not documented"]


def test_routes_are_held_both_ways() -> None:
    _, inv, _ = _real()
    planted = dataclasses.replace(inv, routes=inv.routes | {("POST", "/api/v1/planted/{run_id}")})
    assert _problems(inv=planted) == [
        "POST /api/v1/planted/{run_id} is documented nowhere (`POST /api/v1/planted/{run_id}` in a doc)"
    ]
    assert _problems(_with("docs/api.md", "`DELETE /api/v1/runs/{id}/metrics`")) == [
        "docs/api.md: DELETE /api/v1/runs/{id}/metrics is no route of the server"
    ]
