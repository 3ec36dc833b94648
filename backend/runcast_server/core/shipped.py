"""Where the server finds the files it serves beside its code: the dashboard and its browser bundles.

One rule, in the checkout's layout (``frontend/`` with its built ``frontend/dist``, and
``vendor/node_modules/`` holding the partial Plotly.js) under one root: the package's own
``_dashboard/`` folder, which building a wheel fills (``setup.py``), when it is there;
otherwise the checkout the package sits in (development, ``pip install -e``). The Alembic
migrations need no rule: they are part of the package (``runcast_server/migrations``).
"""

from __future__ import annotations

from pathlib import Path

PACKAGE_DIR = Path(__file__).resolve().parents[1]
# setup.py copies the files here when it builds a wheel; the name is repeated there.
BUILT_DIR = PACKAGE_DIR / "_dashboard"


def files_root() -> Path:
    """The installed package's ``_dashboard/`` if it has one, else the top of the checkout."""
    return BUILT_DIR if BUILT_DIR.is_dir() else PACKAGE_DIR.parents[1]


def frontend_dir() -> Path:
    """The pages, styles and modules (``frontend/``), with the page bundles in ``dist/`` when built."""
    return files_root() / "frontend"


def vendor_dir() -> Path:
    """The npm packages the pages use (``vendor/node_modules``): the partial Plotly.js when installed."""
    return files_root() / "vendor" / "node_modules"
