"""`pip install runcast` (no extras) into a fresh, plain venv: the wheel built from this tree and
what it declares (httpx and its dependencies, from the package index), nothing else. Its
`runcast` syncs a spool, exports, imports and downloads against a real `runcast serve` (run
from the dev venv), and its server and trainer verbs name the extra to install.

Marked slow: it builds a wheel, makes a venv and installs httpx (about 30-60 s).
"""

from __future__ import annotations

import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from services import ROOT, child_env

from integration.test_embedded import make_token

pytestmark = pytest.mark.slow


def sh(*argv: str | Path, env: dict[str, str] | None = None, timeout: float = 300) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(a) for a in argv], env=env, capture_output=True, text=True, timeout=timeout, check=False)


@pytest.fixture(scope="module")
def sdk_venv(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A plain python3.11 venv holding only the runcast wheel and its declared dependencies."""
    tmp = tmp_path_factory.mktemp("sdk-install")
    src = tmp / "src"  # a copy: building in the worktree would leave build/ and *.egg-info there
    src.mkdir()
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(ROOT / name, src / name)
    for name in ("trainer", "backend"):
        shutil.copytree(ROOT / name, src / name, ignore=shutil.ignore_patterns("__pycache__", "*.egg-info"))
    res = sh(sys.executable, "-m", "pip", "wheel", "--quiet", "--no-deps", "--no-build-isolation", "-w", tmp / "dist", src)
    assert res.returncode == 0, res.stderr
    (wheel,) = (tmp / "dist").glob("runcast-*.whl")
    venv = tmp / "venv"
    res = sh(shutil.which("python3.11") or "python3.11", "-m", "venv", venv)
    assert res.returncode == 0, res.stderr
    res = sh(venv / "bin" / "python", "-m", "pip", "install", "--quiet", "--disable-pip-version-check", wheel)
    assert res.returncode == 0, res.stderr
    return venv


def test_a_plain_install_has_a_working_sdk_command(sdk_venv: Path, processes, tmp_path: Path) -> None:
    py, runcast = sdk_venv / "bin" / "python", sdk_venv / "bin" / "runcast"
    env = child_env({})
    env.pop("PYTHONPATH", None)  # only what the venv holds
    res = sh(py, "-c", "import importlib.util as u; print([m for m in ('typer', 'rich', 'click', 'fastapi', "
             "'sqlalchemy', 'torch', 'psutil') if u.find_spec(m)])", env=env)  # fmt: skip
    assert res.stdout == "[]\n", res.stderr
    res = sh(py, "-c", "import runcast, httpx; print(runcast.__file__)", env=env)
    assert res.returncode == 0 and res.stdout.startswith(str(sdk_venv)), res.stderr

    data_dir = tmp_path / "data"
    processes.env = {"RUNCAST_DATA_DIR": str(data_dir)}
    processes.start_api()
    url = processes.api_url
    token = make_token(processes.env, "sdkonly", data_dir)

    # A run that could not reach its server spools; `runcast sync` sends it.
    spool = tmp_path / "spool"
    offline = textwrap.dedent(
        """
        import sys, runcast
        run = runcast.init("sdkonly", "fresh", server="http://127.0.0.1:9", token=sys.argv[1], spool_dir=sys.argv[2],
                           capture_code=False, retry_max=0.1, finish_timeout=1)
        for step in range(50):
            run.log({"loss": 1.0 / (step + 1)}, step=step)
        run.finish()
        print(run.id)
        """
    )
    res = sh(py, "-c", offline, token, spool, env=env)
    assert res.returncode == 0, res.stderr
    run_id = res.stdout.split()[-1]
    res = sh(runcast, "sync", spool, "--server", url, "--token", token, env=env)
    assert res.returncode == 0, res.stdout + res.stderr
    assert "sent 52 events from 1 spool(s)" in res.stdout  # run_started, 50 points, finished

    out = tmp_path / "points.csv"
    res = sh(runcast, "export", run_id, "--server", url, "--token", token, "--format", "csv", "-o", out, env=env)
    assert res.returncode == 0, res.stderr
    assert len(out.read_text().splitlines()) == 1 + 50

    res = sh(runcast, "import", out, "--server", url, "--token", token, "--project", "sdkonly", "--name", "again",
             env=env)  # fmt: skip
    assert res.returncode == 0, res.stderr
    assert res.stdout.splitlines()[-1] == "imported 50 points as 1 run(s), 1 segment(s), 0 note(s)"

    res = sh(runcast, "download", run_id, "latest", "--server", url, "--token", token, "-o", tmp_path, env=env)
    assert (res.returncode, res.stderr) == (3, "error: the run has no downloadable checkpoint\n")  # not found

    for verb, extra in (("serve", "server"), ("worker", "server"), ("db", "server"), ("train", "trainer")):
        res = sh(runcast, verb, "--help", env=env)
        assert res.returncode == 2 and res.stdout == ""
        assert res.stderr.startswith(f"runcast {verb}: needs the '{extra}' extra (") and f"runcast[{extra}]" in res.stderr
    res = sh(runcast, "--help", env=env)
    assert res.returncode == 0 and "  download " in res.stdout
