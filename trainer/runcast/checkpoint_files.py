"""A checkpoint's files on disk: sizing, listing, hashing, copying and deleting them.

Used by the training thread (``run.checkpoint`` sizes a checkpoint and snapshots its
files), by the sender thread (``prepare``: the copy into ``checkpoint_dir``, the sha256,
the deletion of a pruned copy) and by the upload worker (``hash_file``, ``tree_files``).
"""

from __future__ import annotations

import contextlib
import hashlib
import logging
import os
import shutil
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, Final

log = logging.getLogger("runcast")

HASH_CHUNK: Final = 1 << 20


def tree_size(path: str) -> int:
    """The bytes of every file under the directory ``path`` (a file removed meanwhile counts 0)."""
    total = 0
    for folder, _dirs, files in os.walk(path):
        for name in files:
            try:
                total += os.stat(os.path.join(folder, name)).st_size
            except OSError as exc:  # a file removed while the tree is summed
                log.debug("runcast: %s left out of the checkpoint size: %s", name, exc)
    return total


def tree_files(root: str | os.PathLike[str], *, ordered: bool = False) -> Iterator[tuple[str, str]]:
    """(path, real path) of every file of the checkpoint directory ``root``; a link that
    leads out of it (or to something other than a file) is logged and left out.
    ``ordered``: folders and names in sorted order."""
    real_root = os.path.realpath(root)
    for folder, dirs, names in os.walk(root):
        if ordered:
            dirs.sort()
            names.sort()
        for name in names:
            full = os.path.join(folder, name)
            real = os.path.realpath(full)
            if os.path.commonpath([real_root, real]) != real_root or not os.path.isfile(real):
                log.warning("runcast: %s leads out of the checkpoint directory (or is not a file): left out", full)
                continue
            yield full, real


def hash_file(path: Path, progress: Callable[[], None]) -> tuple[int, str]:
    """(size, sha256) of the file as it is now; ``progress`` is called as it is read."""
    digest = hashlib.sha256()
    size = 0
    with open(path, "rb") as handle:
        while chunk := handle.read(HASH_CHUNK):
            digest.update(chunk)
            size += len(chunk)
            progress()
    return size, digest.hexdigest()


def prepare(body: dict[str, Any], stop: Callable[[], bool]) -> dict[str, Any]:
    """A queued checkpoint body as its event reports it, after the file work the training thread
    left to the sender: delete a pruned copy (``_delete``), copy into the storage directory
    (``_copy_to``, ``_copy_dir``), hash the file (``_hash``). ``stop()``: the run is out of time."""
    body = dict(body)
    hash_it = body.pop("_hash", False)
    copy_to, copy_dir = body.pop("_copy_to", None), body.pop("_copy_dir", False)
    delete = body.pop("_delete", None)
    if delete:
        remove_copy(Path(delete))
    if copy_to:
        copied, digest = copy_checkpoint(Path(body["path"]), Path(copy_to), body["size"], copy_dir, stop)
        if copied and body.get("sha256") and digest != body["sha256"]:
            log.warning("runcast: checkpoint %s was rewritten since step %s; its copy is not reported",
                        body["path"], body["step"])  # fmt: skip
            remove_copy(Path(copy_to), quiet=True)
        elif copied:
            body["path"] = copy_to
            if hash_it:
                body["sha256"] = digest
            return body
    if hash_it:
        body["sha256"] = file_sha256(Path(body["path"]), body["size"], stop)
    return body


def file_sha256(path: Path, size: int, stop: Callable[[], bool]) -> str | None:
    """The file's sha256, or None if it changed size, vanished, or ``stop()`` turned true."""
    digest = hashlib.sha256()
    read = 0
    try:
        with open(path, "rb") as handle:
            while chunk := handle.read(HASH_CHUNK):
                digest.update(chunk)
                read += len(chunk)
                if stop():
                    return None
    except OSError as exc:
        log.warning("runcast: could not hash checkpoint %s (%s)", path, exc)
        return None
    if read != size:
        log.warning("runcast: checkpoint %s changed size since it was logged; sha256 not recorded", path)
        return None
    return digest.hexdigest()


def copy_checkpoint(src: Path, dest: Path, size: int, is_dir: bool, stop: Callable[[], bool]) -> tuple[bool, str | None]:
    """Copy a checkpoint into the storage directory: (copied, sha256 of a file).

    The copy is written next to ``dest`` under a hidden temporary name and renamed into
    place, so the server never sees half a file. A file is hashed while it is copied
    (one read); it must still be ``size`` bytes. On any failure nothing is left behind,
    a warning is logged and (False, None) comes back: the event then reports the original.
    """
    tmp = dest.with_name(f".{dest.name}.{uuid.uuid4().hex[:8]}.part")
    try:
        dest.parent.mkdir(parents=True, exist_ok=True)
        if is_dir:
            shutil.copytree(src, tmp, symlinks=False)
            if dest.is_dir() and not dest.is_symlink():
                shutil.rmtree(dest)
            os.replace(tmp, dest)
            return True, None
        digest = hashlib.sha256()
        copied = 0
        with open(src, "rb") as source, open(tmp, "wb") as target:
            while chunk := source.read(HASH_CHUNK):
                digest.update(chunk)
                target.write(chunk)
                copied += len(chunk)
                if stop():
                    raise TimeoutError("the run is closing")
        if copied != size:
            raise OSError(f"it changed size since it was logged ({copied} bytes, not {size})")
        shutil.copystat(src, tmp)
        os.replace(tmp, dest)
        return True, digest.hexdigest()
    except (OSError, shutil.Error) as exc:
        log.warning("runcast: could not copy checkpoint %s to %s (%s); reporting the original", src, dest, exc)
        remove_copy(tmp, quiet=True)
        return False, None


def remove_copy(path: Path, quiet: bool = False) -> None:
    """Delete a copy the SDK made (a pruned checkpoint, or a failed copy) and its empty step folder."""
    try:
        if path.is_dir() and not path.is_symlink():
            shutil.rmtree(path)
        else:
            path.unlink(missing_ok=True)
        with contextlib.suppress(OSError):
            path.parent.rmdir()  # only when empty
    except OSError as exc:
        if not quiet:
            log.warning("runcast: could not delete the pruned checkpoint copy %s (%s)", path, exc)
