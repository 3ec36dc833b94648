"""What setuptools cannot declare in pyproject.toml: the dashboard's files inside the wheel.

The server serves the checkout's ``frontend/`` (pages, styles, modules, and the page bundles
``frontend/dist`` that ``node vendor/build.mjs`` builds) and the partial Plotly.js that npm puts
in ``vendor/node_modules/plotly.js-basic-dist-min``. A wheel has no checkout around it, so
``build_py`` copies them into the package as ``runcast_server/_dashboard/``, in the same
layout (``runcast_server.core.shipped`` reads either). The page bundles are committed
(``vendor/build.mjs``); building from a checkout where node and esbuild are installed
(``scripts/install``) rebuilds them first. The sdist carries them (MANIFEST.in), so a wheel built
from it needs no node. Without npm's partial Plotly.js the wheel still works, with the plotly
package's full Plotly.js.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

from setuptools import setup
from setuptools.command.build_py import build_py
from setuptools.command.sdist import sdist

HERE = Path(__file__).resolve().parent
TARGET = Path("runcast_server") / "_dashboard"  # runcast_server.core.shipped.BUILT_DIR
PLOTLY = Path("vendor") / "node_modules" / "plotly.js-basic-dist-min"
PLOTLY_FILES = ("plotly-basic.min.js", "LICENSE", "package.json")


def build_page_bundles() -> None:
    """``node vendor/build.mjs`` when node and esbuild are here (a checkout after scripts/install); else the committed bundles."""
    node, esbuild = shutil.which("node"), HERE / "vendor" / "node_modules" / ".bin" / "esbuild"
    if node and esbuild.exists():
        subprocess.run([node, str(HERE / "vendor" / "build.mjs")], check=True)
    elif not (HERE / "frontend" / "dist" / "manifest.json").is_file():
        print("setup.py: no node and esbuild and no frontend/dist (it is committed: is this a whole checkout?): "
              "the pages will load their plain modules", file=sys.stderr)  # fmt: skip


class BuildPy(build_py):
    """The packages, then ``frontend/`` and the partial Plotly.js copied into ``runcast_server/_dashboard``."""

    def run(self) -> None:
        super().run()
        if self.editable_mode:  # an editable install reads the checkout itself
            return
        build_page_bundles()
        target = Path(self.build_lib) / TARGET
        shutil.rmtree(target, ignore_errors=True)
        shutil.copytree(HERE / "frontend", target / "frontend", ignore=shutil.ignore_patterns("dist.tmp"))
        if not (HERE / PLOTLY / PLOTLY_FILES[0]).is_file():
            print(f"setup.py: no {PLOTLY}: the pages will get the plotly package's full Plotly.js "
                  "(run scripts/install with npm first for the partial bundle)", file=sys.stderr)  # fmt: skip
            return
        (target / PLOTLY).mkdir(parents=True)
        for name in PLOTLY_FILES:
            shutil.copy(HERE / PLOTLY / name, target / PLOTLY / name)


class Sdist(sdist):
    """The page bundles built before the file list is made, so that the sdist carries them."""

    def run(self) -> None:
        build_page_bundles()
        super().run()


setup(cmdclass={"build_py": BuildPy, "sdist": Sdist})
