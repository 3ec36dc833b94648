"""Free space where the database writes: one rule for ingest and for ``/readyz``.

The embedded database (SQLite) is a file: with less than ``RUNCAST_MIN_FREE_BYTES`` free on
its filesystem, ingest refuses batches (503 with Retry-After, ``errors``) and ``/readyz``
answers 503 (``health``), before SQLite fails its writes with "database or disk is full".
A database server (PostgreSQL) keeps its files on its own disk: not measured here; the
readiness write probe finds it when it can no longer write.
"""

from __future__ import annotations

import shutil
from pathlib import Path

from sqlalchemy.engine import make_url

from runcast_server.core.settings import Settings


class DiskFull(Exception):
    """Less free space than ``RUNCAST_MIN_FREE_BYTES`` where the database writes."""


def database_dir(url: str) -> Path | None:
    """The directory of a SQLite database file; None for a database server or an in-memory one."""
    parsed = make_url(url)
    if parsed.get_backend_name() != "sqlite" or parsed.database in (None, "", ":memory:"):
        return None
    return Path(parsed.database).absolute().parent


def free_bytes(directory: Path) -> int:
    """Bytes an unprivileged process may still write on ``directory``'s filesystem."""
    return shutil.disk_usage(directory).free


def check_room(settings: Settings) -> None:
    """Raise ``DiskFull`` when the database's filesystem is below the minimum (never for 0)."""
    directory = database_dir(settings.sqlalchemy_url)
    if directory is None or settings.min_free_bytes == 0:
        return
    free = free_bytes(directory)
    if free < settings.min_free_bytes:
        raise DiskFull(f"{free} bytes free for the database in {directory}, "
                       f"less than RUNCAST_MIN_FREE_BYTES={settings.min_free_bytes}")
