"""An SDK-only install: `import runcast`, an offline run and the SDK's verbs (sync, import, export,
download) need neither the server nor typer or rich; the other verbs say which extra to install.

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


COMMAND = """
    from runcast.cli.main import main

    main(sys.argv[2:])
    """


def test_the_sdk_verbs_run_without_typer_rich_or_the_server(tmp_path: Path) -> None:
    for verb in ("sync", "import", "export", "download"):
        res = run_python(COMMAND, SERVER_AND_CLI, verb, "--help")
        assert res.returncode == 0, res.stderr
        assert res.stdout.startswith(f"usage: runcast {verb} "), res.stdout
    res = run_python(COMMAND, SERVER_AND_CLI, "sync", str(tmp_path))
    assert (res.returncode, res.stdout, res.stderr) == (0, f"no spools under {tmp_path}\n", "")
    res = run_python(COMMAND, SERVER_AND_CLI, "export", "not an id")
    assert res.returncode == 2 and "runcast export: error: RUN: must be 8-64 characters" in res.stderr
    res = run_python(COMMAND, SERVER_AND_CLI, "import", str(tmp_path / "x.csv"))
    assert res.returncode == 2 and "runcast import: error: --server: needs a server" in res.stderr
    res = run_python(COMMAND, SERVER_AND_CLI, "download", "abcdefgh12", "latest", "--server", "http://127.0.0.1:9")
    assert res.returncode == 1 and res.stderr.startswith("error: ")


def test_the_other_verbs_name_the_extra_to_install() -> None:
    for verb, extra, package in (("serve", "server", "typer"), ("db", "server", "typer"), ("train", "trainer", "typer"),
                                 ("estimate", "cli", "typer")):  # fmt: skip
        res = run_python(COMMAND, SERVER_AND_CLI, verb, "--help")
        assert (res.returncode, res.stdout) == (2, ""), res.stderr
        assert res.stderr == (
            f"runcast {verb}: needs the '{extra}' extra ('{package}' is not installed): pip install 'runcast[{extra}]'\n"
        )
    res = run_python(COMMAND, SERVER_AND_CLI, "--help")
    assert res.returncode == 0 and "  sync " in res.stdout and "serve, worker, demo" in res.stdout
    res = run_python(COMMAND, SERVER_AND_CLI, "nonsense")
    assert res.returncode == 2 and res.stderr.startswith("runcast: no such command 'nonsense'")


def test_the_command_without_the_server_keeps_the_sdk_verbs() -> None:
    res = run_python(COMMAND, "runcast_server", "sync", "--help")
    assert res.returncode == 0, res.stderr
    assert "Replay every spool found under DIRECTORY" in res.stdout
    res = run_python(COMMAND, "runcast_server", "estimate", "--help")  # typer is there: the Typer group
    assert res.returncode == 0, res.stderr
    res = run_python(COMMAND, "runcast_server", "serve", "--help")
    assert res.returncode == 2
    assert "needs the 'server' extra ('runcast_server' is not installed)" in res.stderr
