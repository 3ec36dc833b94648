"""`pip install 'runcast[server]'` is the whole product: the sdist built from this tree, a wheel
built from that sdist with no node on PATH, installed with its declared dependencies into a
fresh python3.11 venv outside the checkout. Its `runcast demo` and its `runcast serve` (on a
new database: the migrations ship in the package) serve a logged run whose page, in Chromium,
gets its page bundle and the partial Plotly.js from the installed package and draws the curve.

Marked slow: it builds an sdist and a wheel and installs the server's dependencies into a
new venv (about 60-90 s). Skipped where the checkout has no partial Plotly.js and esbuild
(scripts/install without npm): then the wheel is built without them, as setup.py says.
"""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
import tarfile
import textwrap
from pathlib import Path
from typing import Any

import httpx
import pytest
from services import ROOT, Process, child_env, free_port, wait_until

from browser.conftest import main_xs

pytestmark = pytest.mark.slow

NODE_MODULES = ROOT / "vendor" / "node_modules"
PLOTLY_DIR = "vendor/node_modules/plotly.js-basic-dist-min"
STEPS = 200
# The run page's chart: an SVG line with a path of at least two points.
CURVE_DRAWN = "() => [...document.querySelectorAll('#chart-main .scatterlayer path.js-line')].some(p => /L/.test(p.getAttribute('d') || ''))"  # noqa: E501


def sh(*argv: str | Path, env: dict[str, str] | None = None, cwd: Path | None = None,
       timeout: float = 600) -> subprocess.CompletedProcess[str]:  # fmt: skip
    return subprocess.run([str(a) for a in argv], env=env, cwd=cwd, capture_output=True, text=True, timeout=timeout,
                          check=False)  # fmt: skip


def copy_checkout(dest: Path) -> None:
    """What building reads (building in the worktree would leave build/ and *.egg-info there)."""
    dest.mkdir()
    for name in ("pyproject.toml", "setup.py", "MANIFEST.in", "README.md"):
        shutil.copy(ROOT / name, dest / name)
    ignore = shutil.ignore_patterns("__pycache__", "*.egg-info", "dist.tmp")
    for name in ("trainer", "backend", "frontend"):
        shutil.copytree(ROOT / name, dest / name, ignore=ignore)
    (dest / "vendor").mkdir()
    for name in ("package.json", "package-lock.json", ".npmrc", "build.mjs", "README.md"):
        shutil.copy(ROOT / "vendor" / name, dest / "vendor" / name)
    (dest / "vendor" / "node_modules").symlink_to(NODE_MODULES.resolve())


@pytest.fixture(scope="module")
def product(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """The sdist, and a fresh venv holding the wheel built from it with the server extra."""
    if not (NODE_MODULES / "plotly.js-basic-dist-min").is_dir() or not (NODE_MODULES / ".bin" / "esbuild").exists():
        pytest.skip("no vendor/node_modules (scripts/install with npm): the wheel would lack the partial Plotly.js")
    tmp = tmp_path_factory.mktemp("product")
    src = tmp / "checkout"
    copy_checkout(src)
    res = sh(sys.executable, "-c", f"from setuptools import build_meta; build_meta.build_sdist({str(tmp / 'sdist')!r})",
             cwd=src)  # fmt: skip
    assert res.returncode == 0, res.stderr
    (sdist,) = (tmp / "sdist").glob("runcast-*.tar.gz")
    with tarfile.open(sdist) as tar:
        tar.extractall(tmp / "unpacked", filter="data")
    (unpacked,) = (tmp / "unpacked").iterdir()
    # The wheel from the sdist, with no node to run: the built files must be in the sdist.
    no_node = {"PATH": str(Path(sys.executable).parent), "HOME": str(tmp)}
    res = sh(sys.executable, "-m", "pip", "wheel", "--quiet", "--no-deps", "--no-build-isolation", "-w", tmp / "dist",
             unpacked, env=no_node)  # fmt: skip
    assert res.returncode == 0, res.stderr
    (wheel,) = (tmp / "dist").glob("runcast-*.whl")
    venv = tmp / "venv"
    res = sh(shutil.which("python3.11") or "python3.11", "-m", "venv", venv)
    assert res.returncode == 0, res.stderr
    res = sh(venv / "bin" / "python", "-m", "pip", "install", "--quiet", "--disable-pip-version-check", f"{wheel}[server]")
    assert res.returncode == 0, res.stderr
    (tmp / "away").mkdir()
    return {"sdist": sdist, "venv": venv, "home": tmp / "away"}


def venv_env(home: Path, **extra: str) -> dict[str, str]:
    """Only what the venv holds: no PYTHONPATH into the checkout, run from a folder outside it."""
    env = child_env(extra)
    env.pop("PYTHONPATH", None)
    env["HOME"] = str(home)
    return env


def test_the_sdist_carries_the_migrations_and_the_built_bundles(product: dict[str, Path]) -> None:
    with tarfile.open(product["sdist"]) as tar:
        names = {n.split("/", 1)[1] for n in tar.getnames() if "/" in n}
    migrations = ROOT / "backend" / "runcast_server" / "migrations"
    for path in [migrations / "env.py", migrations / "script.py.mako", *migrations.glob("versions/*.py")]:
        assert path.relative_to(ROOT).as_posix() in names
    assert {"frontend/dist/manifest.json", "frontend/dist/run.js", "frontend/run.html", "frontend/js/run.js"} <= names
    assert {f"{PLOTLY_DIR}/plotly-basic.min.js", f"{PLOTLY_DIR}/LICENSE"} <= names
    assert not [n for n in names if "__pycache__" in n or "dist.tmp" in n]


def installed_root(product: dict[str, Path]) -> Path:
    """The installed package's copy of the dashboard files (runcast_server.core.shipped.files_root)."""
    res = sh(product["venv"] / "bin" / "python", "-c", "from runcast_server.core import shipped; print(shipped.files_root())",
             env=venv_env(product["home"]), cwd=product["home"])  # fmt: skip
    assert res.returncode == 0, res.stderr
    root = Path(res.stdout.strip())
    assert root.is_relative_to(product["venv"]) and root.name == "_dashboard"
    return root


def log_run(product: dict[str, Path], url: str, token: str, project: str) -> str:
    """A run logged with the installed SDK, as a user's training script would; its id."""
    script = textwrap.dedent(
        f"""
        import sys, runcast
        run = runcast.init({project!r}, "from-the-wheel", server=sys.argv[1], token=sys.argv[2], capture_code=False)
        for step in range({STEPS}):
            run.log({{"train/loss": 2.0 / (step + 1) + 0.1}}, step=step)
        run.finish()
        print(run.id)
        """
    )
    res = sh(product["venv"] / "bin" / "python", "-c", script, url, token, env=venv_env(product["home"]),
             cwd=product["home"])  # fmt: skip
    assert res.returncode == 0, res.stderr
    return res.stdout.split()[-1]


def check_run_page(page: Any, url: str, run_id: str, root: Path) -> None:
    """The run page: bundle and partial Plotly.js served (200, the installed files' bytes), curve drawn."""
    responses: list[Any] = []
    page.on("response", lambda response: responses.append(response))
    page.goto(f"{url}/runs/{run_id}")
    page.wait_for_function("window.__runcastDrawn !== undefined", timeout=30000)
    page.wait_for_function(CURVE_DRAWN, timeout=30000)
    assert main_xs(page) == list(range(STEPS))
    by_path = {re.sub(r"\?.*", "", r.url.removeprefix(url)): r for r in responses}
    bundle = by_path["/dist/run.js"]
    assert bundle.status == 200 and bundle.body() == (root / "frontend" / "dist" / "run.js").read_bytes()
    assert not [p for p in by_path if p.startswith("/js/")]  # the one bundle, not the plain modules
    (plotly,) = [r for p, r in by_path.items() if p.startswith("/vendor/") and p.endswith("/plotly.min.js")]
    assert plotly.status == 200 and plotly.body() == (root / PLOTLY_DIR / "plotly-basic.min.js").read_bytes()
    assert page.errors == [] and page.dialogs == []


def test_runcast_demo_from_the_wheel_serves_the_whole_dashboard(product: dict[str, Path], page: Any,
                                                                 tmp_path: Path) -> None:  # fmt: skip
    root = installed_root(product)
    port = free_port()
    demo = Process("demo", [str(product["venv"] / "bin" / "runcast"), "demo", "--no-train", "--port", str(port),
                            "--data-dir", str(tmp_path / "data")],  # fmt: skip
                   venv_env(product["home"]), tmp_path / "demo.log", cwd=product["home"])
    try:
        found = wait_until(lambda: (demo.check_alive("starting"), re.search(r"RUNCAST_TOKEN=(\S+)", demo.output()))[1],
                           120, "runcast demo's token")  # fmt: skip
        url = f"http://127.0.0.1:{port}"
        run_id = log_run(product, url, found.group(1), "demo")
        check_run_page(page, url, run_id, root)
    finally:
        demo.stop()


def test_runcast_serve_from_the_wheel_migrates_a_new_database_and_serves_the_page(
    product: dict[str, Path], page: Any, tmp_path: Path
) -> None:
    root = installed_root(product)
    runcast = product["venv"] / "bin" / "runcast"
    env = venv_env(product["home"], RUNCAST_DATA_DIR=str(tmp_path / "data"))
    res = sh(runcast, "db", "upgrade", env=env, cwd=product["home"])
    assert res.returncode == 0, res.stdout + res.stderr
    res = sh(runcast, "token", "create", "--project", "wheel", env=env, cwd=product["home"])
    assert res.returncode == 0, res.stderr
    token = res.stdout.strip().splitlines()[-1]
    port = free_port()
    serve = Process("serve", [str(runcast), "serve", "--port", str(port)], env, tmp_path / "serve.log",
                    cwd=product["home"])  # fmt: skip
    try:
        url = f"http://127.0.0.1:{port}"

        def healthy() -> bool:
            serve.check_alive("starting")
            return httpx.get(f"{url}/healthz", timeout=2).status_code == 200

        wait_until(healthy, 120, "runcast serve /healthz", interval=0.3)
        run_id = log_run(product, url, token, "wheel")
        check_run_page(page, url, run_id, root)
    finally:
        serve.stop()
