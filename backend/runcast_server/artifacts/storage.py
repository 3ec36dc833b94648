"""Where checkpoint files live, behind one small interface.

``Storage.locate(recorded_path, within=project)`` turns the path a trainer recorded in
a checkpoint event into a ``StoredObject`` (or raises ``UnsafePath`` / ``NotStored``),
and ``Storage.open(obj)`` gives a ``Reader`` with positional reads for the download route.
``within`` is the checkpoint's project: the key must lie under ``<project>/``, checked
before any file or object is looked at (the tenant wall of docs/artifacts.md).

``LocalStorage`` (the default) serves files in place under a root directory: a
shared filesystem the trainers write to. The rules of ``safe_relative`` and
``LocalStorage.locate`` are the whole of the path safety (docs/artifacts.md):

* the recorded path must be a string without NUL bytes, percent-escapes (``%2e``,
  ``%252e``: nothing is ever URL-decoded, so an encoded path is refused rather than
  guessed at), ``..`` components (split on ``/`` and ``\\``) or a drive letter;
* a relative path is taken relative to the root; an absolute one must lie under the
  root (or under ``trainer_root``, the root as the trainers see it, which is mapped
  onto the root);
* with ``within``, the relative path must begin with ``<within>/`` (lexically, before
  the filesystem is touched);
* the result is resolved with ``os.path.realpath`` (every symlink followed) and must
  still lie under the real root, or under ``<real root>/<within>`` with ``within``
  (``os.path.commonpath``); it must be a regular file or a directory;
* ``open`` opens the resolved path with ``O_NOFOLLOW`` and checks that it is the very
  file (device and inode) that was located, so a swap between the check and the
  open is refused too.

``files(obj)`` lists a directory checkpoint's regular files (relative path, size).

``S3Storage`` (``runcast_server.artifacts.s3``) implements the same methods for
an S3-compatible store: ``locate`` is a HEAD of the object key derived by
``safe_relative`` under the configured prefix, ``open`` streams ranged GETs.
"""

from __future__ import annotations

import os
import re
import stat
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import Protocol

_PERCENT_ESCAPE = re.compile(r"%[0-9A-Fa-f]{2}")
_DRIVE = re.compile(r"^[A-Za-z]:")


class UnsafePath(ValueError):
    """A recorded path that the storage refuses to serve; the message says which rule."""


class NotStored(LookupError):
    """A safe path with nothing (or nothing servable) behind it."""


@dataclass(frozen=True)
class StoredObject:
    """A located checkpoint: ``key`` is its path relative to the storage root (POSIX form)."""

    key: str
    size: int
    mtime: float
    is_dir: bool = False
    path: Path | None = None  # the real local file, when the backend has one
    device: int = 0
    inode: int = 0
    version: str | None = None  # the backend's own validator of the bytes (S3: the object's ETag)

    @property
    def name(self) -> str:
        return PurePosixPath(self.key).name


class Reader(Protocol):
    """Positional reads of one stored object; ``read_at`` may block (call it from a thread).

    A reader may also offer ``span(start, end)``: the download response calls it before
    reading ``[start, end)`` in order, so a remote backend can stream one request.
    """

    def read_at(self, offset: int, size: int) -> bytes: ...

    def close(self) -> None: ...


class Storage(Protocol):
    """The storage interface the artifact routes use."""

    def locate(self, recorded_path: str, within: str | None = None) -> StoredObject: ...

    def open(self, obj: StoredObject) -> Reader: ...

    def files(self, obj: StoredObject) -> list[tuple[str, int]]: ...

    def presign(self, obj: StoredObject, disposition: str, expires_s: int) -> str | None:
        """A URL serving the file ``obj`` for ``expires_s`` seconds with this Content-Disposition; None: no such URL."""
        ...


def safe_relative(recorded_path: str, root: str, trainer_root: str | None = None) -> str:
    """The recorded path as a relative POSIX path under ``root``; ``UnsafePath`` if it breaks a rule.

    Purely lexical (no filesystem access): ``root`` and ``trainer_root`` should be absolute.
    """
    if not isinstance(recorded_path, str) or not recorded_path:
        raise UnsafePath("empty path")
    if "\x00" in recorded_path:
        raise UnsafePath("NUL byte in path")
    if _PERCENT_ESCAPE.search(recorded_path):
        raise UnsafePath("percent-encoded characters in path")
    if _DRIVE.match(recorded_path):
        raise UnsafePath("drive-letter path")
    parts = re.split(r"[/\\]", recorded_path)
    if ".." in parts:
        raise UnsafePath("'..' in path")
    if recorded_path.startswith(("/", "\\")):
        path = os.path.normpath(recorded_path)
        for base in (root, trainer_root):
            if not base:
                continue
            base = os.path.normpath(base)
            if path != base and os.path.commonpath([base, path]) == base:
                return PurePosixPath(os.path.relpath(path, base)).as_posix()
        raise UnsafePath("absolute path outside the storage root")
    rel = PurePosixPath(*(p for p in parts if p not in ("", ".")))
    if not rel.parts:
        raise UnsafePath("path names the storage root itself")
    return rel.as_posix()


def check_within(key: str, within: str | None) -> None:
    """``UnsafePath`` unless ``key`` (relative to the root) lies under the directory ``within``."""
    if within is not None and not key.startswith(within + "/"):
        raise UnsafePath("outside the project's directory of the storage root")


class _FileReader:
    def __init__(self, fd: int) -> None:
        self._fd = fd

    def read_at(self, offset: int, size: int) -> bytes:
        return os.pread(self._fd, size, offset)

    def close(self) -> None:
        os.close(self._fd)


class LocalStorage:
    """Files under ``root`` on a local or shared filesystem, served in place."""

    def __init__(self, root: str | os.PathLike[str], trainer_root: str | None = None) -> None:
        self.root = os.path.abspath(os.fspath(root))
        self.trainer_root = os.path.abspath(trainer_root) if trainer_root else None

    def locate(self, recorded_path: str, within: str | None = None) -> StoredObject:
        key = safe_relative(recorded_path, self.root, self.trainer_root)
        check_within(key, within)
        real_root = os.path.realpath(self.root)
        base = os.path.join(real_root, within) if within is not None else real_root
        real = os.path.realpath(os.path.join(real_root, key))
        if os.path.commonpath([base, real]) != base or real == base:
            raise UnsafePath(
                "path leaves the project's directory through a symbolic link"
                if within is not None else "path leaves the storage root through a symbolic link"
            )
        try:
            info = os.stat(real)
        except FileNotFoundError:
            raise NotStored("no such file under the storage root") from None
        except OSError as exc:
            raise NotStored(f"cannot read the file ({exc.strerror})") from None
        if not (stat.S_ISREG(info.st_mode) or stat.S_ISDIR(info.st_mode)):
            raise NotStored("not a regular file")
        return StoredObject(
            key=key,
            size=info.st_size,
            mtime=info.st_mtime,
            is_dir=stat.S_ISDIR(info.st_mode),
            path=Path(real),
            device=info.st_dev,
            inode=info.st_ino,
        )

    def open(self, obj: StoredObject) -> Reader:
        if obj.path is None or obj.is_dir:
            raise NotStored("not a file")
        try:
            fd = os.open(obj.path, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_CLOEXEC", 0))
        except OSError as exc:
            raise NotStored(f"cannot open the file ({exc.strerror})") from None
        info = os.fstat(fd)
        if (info.st_dev, info.st_ino) != (obj.device, obj.inode) or not stat.S_ISREG(info.st_mode):
            os.close(fd)
            raise NotStored("the file changed while it was being opened")
        return _FileReader(fd)

    def presign(self, obj: StoredObject, disposition: str, expires_s: int) -> None:
        """Local files have no URL of their own (nginx's X-Accel-Redirect hands them off instead)."""
        return

    def files(self, obj: StoredObject) -> list[tuple[str, int]]:
        """``(relative POSIX path, size)`` of every regular file in a directory checkpoint, sorted.

        Symbolic links are not followed and not listed: a tree never reaches out of itself.
        """
        if obj.path is None or not obj.is_dir:
            return []
        out: list[tuple[str, int]] = []
        for folder, dirs, names in os.walk(obj.path, followlinks=False):
            dirs.sort()
            for name in names:
                full = os.path.join(folder, name)
                info = os.lstat(full)
                if stat.S_ISREG(info.st_mode):
                    out.append((PurePosixPath(Path(full).relative_to(obj.path)).as_posix(), info.st_size))
        return sorted(out)
