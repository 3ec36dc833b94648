"""What a run records about where it runs: the environment and the code revision.

Both are best effort: a missing tool, a directory that is not a git repository or a
slow ``git`` gives empty fields, never an error. Heavy libraries are never imported:
versions come from package metadata, and CUDA devices are listed only when the
training code has already imported torch.
"""

from __future__ import annotations

import logging
import os
import platform
import socket
import subprocess
import sys
from typing import Any, Final

from .sender.transport import public_url

log = logging.getLogger("runcast")

MAX_DIFF_BYTES: Final = 256 * 1024
GIT_TIMEOUT: Final = 3.0
_PACKAGES: Final = ("torch", "deepspeed", "transformers", "numpy")


def environment(rank: int | None = None) -> dict[str, Any]:
    """Python, platform, host, pid, rank, world size, library versions, CUDA devices."""
    env: dict[str, Any] = {
        "python": platform.python_version(),
        "implementation": platform.python_implementation(),
        "platform": platform.platform(),
        "host": socket.gethostname(),
        "pid": os.getpid(),
        "rank": rank,
        "world_size": _int_env("WORLD_SIZE"),
    }
    for name in _PACKAGES:
        env[name] = _version(name)
    env.update(_cuda())
    return env


def code_revision(cwd: str | None = None) -> dict[str, Any]:
    """Git sha, branch, remote (without credentials), dirty flag and diff (capped) of ``cwd``."""
    sha = _git(["rev-parse", "HEAD"], cwd)
    if not sha:
        return {}
    branch = _git(["rev-parse", "--abbrev-ref", "HEAD"], cwd)
    remote = _git(["config", "--get", "remote.origin.url"], cwd)
    status = _git(["status", "--porcelain", "--untracked-files=no"], cwd)
    diff = _git(["diff", "HEAD", "--no-color", "--no-ext-diff"], cwd, strip=False) or ""
    raw = diff.encode("utf-8", "replace")
    truncated = len(raw) > MAX_DIFF_BYTES
    if truncated:
        diff = raw[:MAX_DIFF_BYTES].decode("utf-8", "ignore")
    return {
        "sha": sha,
        "branch": None if branch in (None, "HEAD") else branch,
        "remote": public_url(remote) if remote else None,
        "dirty": bool(status),
        "diff": diff,
        "diff_truncated": truncated,
    }


def storable(tree: Any) -> Any:
    """``tree`` with every string made storable text: NUL and lone surrogates (from odd host
    names or diffs) become U+FFFD. What the SDK captured itself must never be refused."""
    if isinstance(tree, str):
        return tree.encode("utf-8", "replace").decode("utf-8").replace("\x00", "\ufffd")
    if isinstance(tree, dict):
        return {storable(k): storable(v) for k, v in tree.items()}
    if isinstance(tree, list):
        return [storable(v) for v in tree]
    return tree


def _git(args: list[str], cwd: str | None, *, strip: bool = True) -> str | None:
    try:
        done = subprocess.run(
            ["git", *args],
            cwd=cwd,
            capture_output=True,
            timeout=GIT_TIMEOUT,
            env={**os.environ, "GIT_TERMINAL_PROMPT": "0", "LC_ALL": "C"},
            check=False,
        )
    except (OSError, subprocess.SubprocessError):
        return None
    if done.returncode != 0:
        return None
    out = done.stdout.decode("utf-8", "replace")
    return out.strip() if strip else out


def _version(name: str) -> str | None:
    from importlib import metadata  # slow to import: only when a run starts

    try:
        return metadata.version(name)
    except metadata.PackageNotFoundError:
        return None


def _int_env(name: str) -> int | None:
    try:
        return int(os.environ[name])
    except (KeyError, ValueError):
        return None


def _cuda() -> dict[str, Any]:
    torch = sys.modules.get("torch")
    if torch is None:
        return {}
    try:
        cuda = torch.cuda
        if not cuda.is_available():
            return {"cuda_devices": 0}
        out: dict[str, Any] = {"cuda_devices": cuda.device_count(), "cuda": torch.version.cuda}
        if cuda.is_initialized():  # naming devices would initialise CUDA in a process that may fork
            out["cuda_names"] = [cuda.get_device_name(i) for i in range(cuda.device_count())]
        return out
    except Exception as exc:  # the environment is informational only
        log.debug("runcast: CUDA devices not recorded: %s", exc, exc_info=True)
        return {}
