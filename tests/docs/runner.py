"""Run one example as a reader would: a shell block in bash, a Python block in the venv's python,
an HTTP block as that request. Shell variables a block sets (``RC=...``, ``TOKEN=$(...)``) carry
over to the page's next shell blocks, as in one terminal.

Two things are added, and docs/testing.md says so: ``set -eo pipefail`` (a failing command fails the
example) and ``curl`` as ``curl --fail-with-body`` (an HTTP error answer fails it too).
"""

from __future__ import annotations

import contextlib
import os
import re
import signal
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import httpx

from docs.workspace import Workspace

_PRELUDE = """set -eo pipefail
curl() { command curl --fail-with-body "$@"; }
declare -p > "$__DOCS_DIR/before"
if [ -f "$__DOCS_DIR/state" ]; then source "$__DOCS_DIR/state"; fi
"""
_EPILOGUE = '\ndeclare -p > "$__DOCS_DIR/after"\n'
_DECLARATION = re.compile(r"^declare -(?P<flags>[-a-zA-Z]*) (?P<name>[A-Za-z_][A-Za-z0-9_]*)=")
_SHELL_OWN = re.compile(
    r"BASH.*|_.*|FUNCNAME|PIPESTATUS|LINENO|RANDOM|SRANDOM|SECONDS|EPOCH.*|OLDPWD|PWD|SHLVL|HISTCMD|COLUMNS|LINES"
)


@dataclass(frozen=True)
class Result:
    """What an example did: its exit status (an HTTP request: 0 for a 2xx or 3xx answer, else 22,
    as curl --fail), its standard output and error."""

    status: int
    stdout: str
    stderr: str

    def describe(self) -> str:
        return (
            f"exit status {self.status}\n--- stdout ---\n{self.stdout[-6000:]}\n--- stderr ---\n{self.stderr[-6000:]}"
        )


def shell(script: str, ws: Workspace, env: dict[str, str], timeout: float, stop_after_s: float | None = None) -> Result:
    """Run ``script`` in bash in the page's working directory; keep the variables it set for the next."""
    state_dir = ws.base / "shell"
    state_dir.mkdir(exist_ok=True)
    (state_dir / "after").unlink(missing_ok=True)
    path = state_dir / "example.sh"
    path.write_text(_PRELUDE + script + _EPILOGUE)
    result = _run(["bash", str(path)], ws.cwd, {**env, "__DOCS_DIR": str(state_dir)}, timeout, stop_after_s)
    if (state_dir / "after").exists():
        _keep_variables(state_dir)
    return result


def python(source: str, ws: Workspace, env: dict[str, str], timeout: float) -> Result:
    """Run ``source`` as a script with the venv's python in the page's working directory."""
    path = ws.base / "example.py"
    path.write_text(source)
    return _run([sys.executable, str(path)], ws.cwd, env, timeout, None)


def http(request: str, ws: Workspace) -> Result:
    """Send an HTTP request written as in RFC 9112 (request line, headers, blank line, body) to the page's server."""
    head, _, body = request.partition("\n\n")
    method, target, *_ = head.splitlines()[0].split()
    headers = dict(line.split(": ", 1) for line in head.splitlines()[1:])
    answer = httpx.request(method, ws.url + target, headers=headers, content=body.strip().encode(), timeout=30)
    return Result(0 if answer.status_code < 400 else 22, answer.text, f"HTTP {answer.status_code}")


def _run(argv: list[str], cwd: Path, env: dict[str, str], timeout: float, stop_after_s: float | None) -> Result:
    process = subprocess.Popen(argv, cwd=cwd, env=env, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                               stderr=subprocess.PIPE, text=True, start_new_session=True)  # fmt: skip
    try:
        out, err = process.communicate(timeout=stop_after_s or timeout)
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, signal.SIGTERM if stop_after_s else signal.SIGKILL)
        out, err = process.communicate()
        if not stop_after_s:
            err += f"\n(killed after {timeout:.0f} s)"
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGKILL)  # anything the example left running in the background
    return Result(process.returncode, out, err)


def _keep_variables(state_dir: Path) -> None:
    """The variables the block set or changed (``declare -p`` after it, less before it), plus those kept before."""
    before = set((state_dir / "before").read_text().splitlines())
    kept: dict[str, str] = {}
    for line in (state_dir / "after").read_text().splitlines():
        m = _DECLARATION.match(line)
        if m and line not in before and "r" not in m["flags"] and not _SHELL_OWN.fullmatch(m["name"]):
            kept[m["name"]] = line
    (state_dir / "state").write_text("".join(f"{line}\n" for line in kept.values()))
