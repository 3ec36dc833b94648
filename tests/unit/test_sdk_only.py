"""An SDK-only install: `import runcast` and an offline run need neither the server nor typer,
and the `runcast` command says in one line which package it misses.

Each check runs in a child process whose import system refuses the blocked packages, as if
they were not installed (this venv has them all).
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

from services import ROOT

BLOCKER = textwrap.dedent(
    """
    import sys

    BLOCKED = set(sys.argv[1].split(","))

    class NotInstalled:
        def find_spec(self, name, path=None, target=None):
            if name.partition(".")[0] in BLOCKED:
                raise ModuleNotFoundError(f"No module named {name!r}", name=name)
            return None

    sys.meta_path.insert(0, NotInstalled())
    """
)
SERVER_AND_CLI = "runcast_server,typer,rich,click,fastapi,sqlalchemy,celery,pydantic_settings,uvicorn,torch,numpy"


def run_python(code: str, blocked: str, *args: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("RUNCAST_")}
    env["PYTHONPATH"] = f"{ROOT / 'trainer'}{os.pathsep}{ROOT / 'backend'}"
    return subprocess.run(
        [sys.executable, "-c", BLOCKER + textwrap.dedent(code), blocked, *args],
        env=env, capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip


def test_an_offline_run_needs_only_the_sdk(tmp_path: Path) -> None:
    res = run_python(
        """
        import runcast

        run = runcast.init("sdkonly", "offline", spool_dir=sys.argv[2], capture_code=False)
        for step in range(10):
            run.log({"loss": 1.0 / (step + 1)}, step=step)
        run.finish()
        loaded = sorted({m.partition(".")[0] for m in sys.modules} & BLOCKED)
        print("loaded:", loaded)
        """,
        SERVER_AND_CLI, str(tmp_path),
    )  # fmt: skip
    assert res.returncode == 0, res.stderr
    assert "loaded: []" in res.stdout
    assert any(tmp_path.rglob("*")), "the offline run left its spool"


def test_the_command_without_typer_names_the_missing_package() -> None:
    res = run_python(
        """
        from runcast.cli.main import app

        sys.argv = ["runcast", "sync", "--help"]
        app()
        """,
        SERVER_AND_CLI,
    )
    assert res.returncode == 2
    assert res.stdout == ""
    assert res.stderr == (
        "runcast: the command line needs the 'typer' package, which is not installed: pip install 'runcast[cli]'\n"
    )


def test_the_command_without_the_server_keeps_the_sdk_verbs() -> None:
    code = """
        from runcast.cli.main import app

        sys.argv = ["runcast", *sys.argv[2:]]
        app()
        """
    res = run_python(code, "runcast_server", "sync", "--help")
    assert res.returncode == 0, res.stderr
    assert "Replay every spool found under DIRECTORY" in res.stdout
    res = run_python(code, "runcast_server", "serve", "--help")
    assert res.returncode == 2
    assert "No such command 'serve'" in res.stderr
