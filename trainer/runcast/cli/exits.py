"""Exit statuses of every ``runcast`` verb (docs/cli.md); standard library only, so the
SDK-only verbs (``runcast.cli.sdk``) share them.

0  done
1  failed: the server could not be reached, answered 5xx, or the work did not finish
2  bad input: a missing or malformed argument or option (the message names it)
3  not found: the run, checkpoint or token does not exist, or the token may not see it
4  refused: no token, or one that is invalid, revoked or of another project (401/403)
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Final

if TYPE_CHECKING:
    import httpx

EXIT_OK: Final = 0
EXIT_FAILED: Final = 1
EXIT_USAGE: Final = 2
EXIT_NOT_FOUND: Final = 3
EXIT_REFUSED: Final = 4


def exit_status(http_status: int) -> int:
    """The command's exit status for an HTTP error status."""
    if http_status == 404:
        return EXIT_NOT_FOUND
    if http_status in (401, 403):
        return EXIT_REFUSED
    if http_status in (400, 413, 422):
        return EXIT_USAGE
    return EXIT_FAILED


def server_message(response: httpx.Response) -> str:
    """The ``error.message`` (and field) of a Runcast error body (an ``httpx.Response``), else the body's start."""
    text = response.read().decode(errors="replace")
    try:
        error = json.loads(text)["error"]
        message = str(error["message"])
        return f"{message} ({error['field']})" if error.get("field") else message
    except (ValueError, KeyError, TypeError):
        return text.strip()[:300] or response.reason_phrase


class UsageError(Exception):
    """A flag or argument the verb cannot use; ``flag`` names it."""

    def __init__(self, flag: str, message: str) -> None:
        super().__init__(f"{flag}: {message}")
        self.flag = flag
