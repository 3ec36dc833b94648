"""``run.checkpoint()``: a checkpoint reported by its path, copied into ``checkpoint_dir``, or
published over HTTP by the upload worker (``sender/upload.py``).

The training thread only reads sizes and makes hard links here; hashing, copying and
uploading happen on the sender thread or the upload worker. A pruned report waits for
the uploads submitted before it, so that the server records them in the trainer's order.
"""

from __future__ import annotations

import logging
import os
import shutil
import time
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import Any

from .checkpoint_files import tree_files, tree_size
from .sender.upload import Uploader
from .sender.upload_jobs import Job, UploadStats
from .steps import checked_step
from .values import wire_numbers

log = logging.getLogger("runcast")

Put = Callable[[str, float, int | None, Any], None]  # queue an event: (type, ts, step, body)
Check = Callable[[str, Mapping[str, Any]], None]  # validate an event body of a type (raises)


class Checkpoints:
    """The checkpoints of one run segment."""

    def __init__(self, *, run_id: str, project: Callable[[], str | None], checkpoint_dir: Path | None, put: Put,
                 check: Check, seq: Iterator[int]) -> None:
        self.run_id = run_id
        self.project = project  # the run's project; None while not known (the server away since init)
        self.checkpoint_dir = checkpoint_dir
        self._put = put
        self._check = check
        self._seq = seq  # the segment's event numbers: an upload reserves its event's number
        self.uploader: Uploader | None = None  # set by the run when the server takes uploads
        self.snapshots: Path | None = None  # hard links to checkpoints waiting for their upload
        # pruned reports waiting for the uploads submitted before them: (uploads submitted then, body)
        self.prunes: list[tuple[int, dict[str, Any]]] = []

    def record(self, path: str | os.PathLike[str], step: int, metrics: Mapping[str, Any] | None, public: bool,
               status: str, sha256: str | None, *, live: bool) -> None:
        """``run.checkpoint(...)`` (its docstring); ``live``: the run is sending (not finished, not a
        rank that records nothing)."""
        path = os.path.abspath(os.fspath(path))
        copy_to = self._copy_target(path, step) if live else None
        if status == "pruned" and not os.path.exists(path):
            is_dir, size = False, 0
        else:
            info = os.stat(path)
            is_dir = os.path.isdir(path)
            size = tree_size(path) if is_dir else info.st_size
        body = {
            "step": checked_step(step),
            "path": path,
            "size": size,
            "sha256": sha256,
            "metrics": wire_numbers(metrics or {}, "metrics"),
            "public": public,
            "status": status,
        }
        self._check("checkpoint", body)
        if self.uploader is not None and live and self.uploader.decided(1.0) is not False:
            self._upload(body, is_dir)
            return
        if copy_to is not None:
            self._check("checkpoint", {**body, "path": copy_to})
            if status == "pruned":
                body["path"] = copy_to  # the copy is what the server knows
                body["_delete"] = copy_to
            else:
                body["_copy_to"] = copy_to
                body["_copy_dir"] = is_dir
        if live and not is_dir and status == "available" and sha256 is None:
            body["_hash"] = True
        self._put("checkpoint", time.time(), None, body)

    def stats(self) -> UploadStats:
        return self.uploader.stats() if self.uploader is not None else UploadStats()

    def wait_for_uploads(self, timeout: float | None) -> float | None:
        """Wait up to ``timeout`` s until the checkpoints submitted so far are settled; the time left."""
        uploader = self.uploader
        if uploader is None or uploader.settled >= uploader.queued:
            return timeout
        deadline = None if timeout is None else time.monotonic() + timeout
        target = uploader.queued
        while uploader.settled < target and (deadline is None or time.monotonic() < deadline):
            time.sleep(0.02)
        return None if deadline is None else max(0.0, deadline - time.monotonic())

    def close(self, timeout: float) -> None:
        """Wait for the uploads (while bytes keep moving, ``Uploader.close``), then send every pruned report."""
        assert self.uploader is not None
        self.uploader.close(timeout)
        self.release_prunes(final=True)

    def release_prunes(self, final: bool = False) -> None:
        """Send the pruned reports once the uploads submitted before them are settled (all when ``final``)."""
        uploader = self.uploader
        assert uploader is not None
        for job in uploader.take_fallback():
            self._by_path(job)
        waiting = []
        for after, body in self.prunes:
            if not final and uploader.settled < after:
                waiting.append((after, body))
                continue
            path, step = body["path"], body["step"]
            # name the path the server recorded it under
            project = self.project()
            recorded = f"{project}/{self.run_id}/step-{step}/{os.path.basename(path)}" if project else path
            body["path"] = uploader.recorded.get((path, step), recorded)
            self._put("checkpoint", time.time(), None, body)
        self.prunes = waiting

    def _upload(self, body: dict[str, Any], is_dir: bool) -> None:
        """Hand a checkpoint to the uploader (the server records its event once verified)."""
        uploader = self.uploader
        assert uploader is not None
        if body["status"] == "pruned":
            # After the uploads before it, in the trainer's order: the server records an upload when it completes.
            self.prunes.append((uploader.queued, body))
            self.release_prunes()
            return
        for job in uploader.take_fallback():
            self._by_path(job)
        seq = next(self._seq)
        source, snapshot = self._snapshot(body["path"], is_dir, seq)
        uploader.submit(Job(path=body["path"], step=body["step"], seq=seq, ts=time.time(), size=body["size"],
                            is_dir=is_dir, metrics=body["metrics"], public=body["public"], source=source,
                            snapshot=snapshot))

    def _snapshot(self, path: str, is_dir: bool, seq: int) -> tuple[str | None, str | None]:
        """Hard links to the checkpoint's files as they are now, so that a trainer pruning it before
        its upload got to it loses nothing: (what to read, the directory to remove later). (None,
        None) where links cannot be made (no spool, or another filesystem): the upload reads ``path``."""
        if self.snapshots is None:
            return None, None
        target = self.snapshots / str(seq)
        try:
            target.mkdir(parents=True)
            if not is_dir:
                link = target / os.path.basename(path)
                os.link(path, link)
                return str(link), str(target)
            tree = target / "tree"
            tree.mkdir()
            for full, real in tree_files(path):
                here = tree / os.path.relpath(os.path.dirname(full), path)
                here.mkdir(parents=True, exist_ok=True)
                os.link(real, here / os.path.basename(full))  # a link inside the tree becomes the file it names
            return str(tree), str(target)
        except OSError:
            shutil.rmtree(target, ignore_errors=True)
            return None, None

    def _by_path(self, job: Job) -> None:
        """Report a checkpoint by its path (the server takes no uploads): the sender hashes a file."""
        body = {"step": job.step, "path": job.path, "size": job.size, "sha256": None, "metrics": job.metrics,
                "public": job.public, "status": "available"}
        if not job.is_dir:
            body["_hash"] = True
        self._put("checkpoint", job.ts, None, body)

    def _copy_target(self, path: str, step: Any) -> str | None:
        """Where ``checkpoint_dir`` puts a copy of ``path``; None when there is no copy to make."""
        if self.checkpoint_dir is None:
            return None
        project = self.project()
        if project is None:
            log.warning("runcast: checkpoint %s is reported at its path, not copied into checkpoint_dir: the run's "
                        "project is not known while the server cannot be reached", path)
            return None
        # The server serves a project's checkpoints only from <storage root>/<project>/.
        root = os.path.join(os.path.abspath(self.checkpoint_dir), project)
        if os.path.commonpath([root, path]) == root:
            return None  # already in the project's storage directory: reported in place
        name = os.path.basename(path)
        if not name:
            raise ValueError(f"checkpoint path {path!r} has no file name")
        return os.path.join(root, self.run_id, f"step-{checked_step(step)}", name)
