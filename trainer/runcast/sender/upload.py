"""Publishing checkpoints over HTTP, on a worker thread of its own.

``run.checkpoint()`` hands the checkpoint to the ``Uploader`` and returns. The worker
(never the sender thread, which keeps sending metrics and heartbeats) hashes each file,
asks the server to begin (``POST /api/v1/runs/{run}/uploads`` with the manifest), and:

* ``state: done``: the server already holds these bytes (shared storage, or an upload
  finished before a restart) and recorded the checkpoint;
* local storage: sends each file in chunks (``PUT .../files/{i}?offset=``, each with its
  sha256) from where the server's stored bytes end, so an upload interrupted by a
  restart of either side continues from the last stored chunk;
* S3 storage: sends the missing parts to the presigned URLs the server handed out,
  straight to the bucket (``Content-MD5`` on each, checked by the store);

then ``.../complete``: the server checks every file's sha256, moves the checkpoint into
place and records the checkpoint event itself. ``bandwidth`` (bytes per second) paces
the sending. Failures of the service are retried with back-off; a checkpoint the server
refuses for good is logged and counted in ``UploadStats.failed``.
"""

from __future__ import annotations

import base64
import hashlib
import logging
import queue
import shutil
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any, Final, cast

from ..checkpoint_files import hash_file, tree_files
from .upload_jobs import Job, UploadConfig, UploadStats

log = logging.getLogger("runcast")

_BEGIN_RETRIES_LOGGED: Final = 3
_PACE_SLICE: Final = 256 * 1024


class Refused(Exception):
    """The server refused the checkpoint for good (a 4xx other than 404/408/409/429)."""


class _Retry(Exception):
    """Try again after a pause (connection error, 5xx, 404 while the run's start is not stored)."""


class Uploader:
    """Publishes the checkpoints of one run segment on a daemon thread, in the order given."""

    def __init__(self, config: UploadConfig, run_id: str, segment: str) -> None:
        import httpx

        self._httpx = httpx
        self.config = config
        self.run_id = run_id
        self.segment = segment
        self._client: Any = None  # made on the worker thread: init() returns without waiting for it
        self._bucket: Any = None  # presigned URLs: no token
        self._jobs: queue.Queue[Job | None] = queue.Queue()
        self._closing = threading.Event()
        self._submitted = 0
        self._bytes_total = 0
        self._done = 0
        self._failed = 0
        self._bytes_done = 0  # of finished checkpoints
        self._current = 0  # bytes the server holds of the checkpoint being sent
        self._bytes_sent = 0
        self._progress_at = time.monotonic()
        self._paced_from: float | None = None
        self._paced_bytes = 0
        self.recorded: dict[tuple[str, int], str] = {}  # (trainer path, step) -> path the server recorded
        self.queued = 0  # jobs submitted so far
        self.settled = 0  # of those, how many are published, failed or sent by path (in order: one worker)
        self.available: bool | None = None  # whether the server takes uploads (GET /api/v1/storage)
        self._known = threading.Event()
        self._waited = False
        self.fallback: list[Job] = []  # submitted before the server said it takes none: the run sends them
        self._thread = threading.Thread(target=self._run, name=f"runcast-upload-{run_id[:8]}", daemon=True)
        self._thread.start()

    # --- the training thread's side ------------------------------------------------------

    def decided(self, timeout: float) -> bool | None:
        """Whether the server takes uploads (None: not known yet).

        The first call waits up to ``timeout`` s for the server's answer; later calls never wait.
        """
        if not self._waited:
            self._waited = True
            self._known.wait(timeout)
        return self.available

    def take_fallback(self) -> list[Job]:
        """Checkpoints to send the classic way (an older server that takes no uploads)."""
        jobs, self.fallback = self.fallback, []
        return jobs

    def submit(self, job: Job) -> None:
        self.queued += 1
        self._submitted += 1
        self._bytes_total += job.size
        self._jobs.put(job)

    def stats(self) -> UploadStats:
        finished = self._done + self._failed
        return UploadStats(self._submitted - finished, self._done, self._failed, self._bytes_total,
                           self._bytes_done + self._current, self._bytes_sent)

    def close(self, stall_timeout: float) -> bool:
        """Wait for the submitted checkpoints while bytes keep moving; True when all were published.

        Gives up after ``stall_timeout`` seconds without progress (the run then closes
        without the rest; calling ``run.checkpoint`` again from a resumed run continues them).
        """
        if self._submitted == self._done + self._failed and self._jobs.empty():
            self._closing.set()  # nothing to publish: do not wait for the server's answer
        self._jobs.put(None)
        while self._thread.is_alive():
            self._thread.join(timeout=0.2)
            if time.monotonic() - self._progress_at > stall_timeout:
                break
        self._closing.set()
        self._thread.join(timeout=5)
        left = self._submitted - self._done - self._failed
        if left:
            log.warning("runcast: %d checkpoint(s) of run %s were not published before it closed; "
                        "call run.checkpoint() with the same files from a resumed run to continue", left, self.run_id)
        if not self._thread.is_alive():
            for client in (self._client, self._bucket):
                if client is not None:
                    client.close()
        return left == 0

    # --- the worker --------------------------------------------------------------------

    def _discover(self) -> bool:
        """Ask the server whether it takes uploads (retrying while it cannot be reached)."""
        delay = self.config.retry_initial
        while not self._closing.is_set():
            try:
                response = self._client.get("/api/v1/storage")
                if response.status_code < 500 or response.status_code == 501:  # 501: not a Runcast API
                    body = response.json() if response.status_code == 200 else {}
                    return isinstance(body, dict) and body.get("uploads") is True
            except (self._httpx.TransportError, ValueError):
                pass
            if self._closing.wait(delay):
                break
            delay = min(self.config.retry_max, delay * 2)
        return False

    def _connect(self) -> None:
        httpx = self._httpx
        headers = {"User-Agent": "runcast-sdk"}
        if self.config.token:
            headers["Authorization"] = f"Bearer {self.config.token}"
        timeout = httpx.Timeout(self.config.timeout, connect=10.0)
        self._client = httpx.Client(base_url=self.config.server.rstrip("/"), headers=headers, timeout=timeout)
        self._bucket = httpx.Client(timeout=timeout)

    def _run(self) -> None:
        self._connect()
        self.available = self._discover()
        self._known.set()
        if not self.available:
            log.info("runcast: %s takes no checkpoint uploads; checkpoints are reported by path", self.config.server)
        while True:
            job = self._jobs.get()
            if job is None:
                return
            if not self.available:
                self.recorded[(job.path, job.step)] = job.path
                self.fallback.append(job)
                self._submitted -= 1
                self._bytes_total -= job.size
                self._settle(job)
                continue
            self._progress()
            try:
                self._publish(job)
                self._done += 1
            except _Closing:
                return
            except Exception as exc:  # noqa: BLE001 - Refused, or an unreadable file: never let the worker die
                self._failed += 1
                reason = str(exc) if isinstance(exc, Refused) else f"{type(exc).__name__}: {exc}"
                log.error("runcast: checkpoint %s (step %d) was not published: %s", job.path, job.step, reason)
            self._bytes_done += job.size
            self._current = 0
            self._settle(job)

    def _settle(self, job: Job) -> None:
        if job.snapshot is not None:
            shutil.rmtree(job.snapshot, ignore_errors=True)
        self.settled += 1

    def _publish(self, job: Job) -> None:
        if not job.files:
            job.files = self._manifest(job)
        delay = self.config.retry_initial
        attempt = 0
        while True:
            if self._closing.is_set():
                raise _Closing
            try:
                state = self._begin(job)
                if state["state"] == "done":
                    self.recorded[(job.path, job.step)] = state.get("path") or job.path
                    return
                if self._send(job, state):
                    continue  # the server's view moved (409, more parts): ask again at once
                self._call("POST", f"/uploads/{state['id']}/complete")
                self.recorded[(job.path, job.step)] = state["path"]
                return
            except _Retry as exc:
                attempt += 1
                (log.warning if attempt <= _BEGIN_RETRIES_LOGGED else log.debug)(
                    "runcast: checkpoint upload of %s paused (%s); retrying in %.1f s", job.path, exc, delay)
                if self._closing.wait(delay):
                    raise _Closing from None
                delay = min(self.config.retry_max, delay * 2)

    def _manifest(self, job: Job) -> list[tuple[str, str, int, str]]:
        """(relative path, absolute path, size, sha256) of every file of the checkpoint."""
        root = Path(job.source or job.path)
        if not job.is_dir:
            return [(root.name, str(root), *hash_file(root, self._progress))]
        return [(Path(full).relative_to(root).as_posix(), full, *hash_file(Path(full), self._progress))
                for full, _real in tree_files(root, ordered=True)]

    def _begin(self, job: Job) -> dict[str, Any]:
        body = {
            "segment": self.segment, "seq": job.seq, "ts": job.ts, "step": job.step,
            "name": Path(job.path).name, "kind": "directory" if job.is_dir else "file",
            "path": job.path, "metrics": job.metrics, "public": job.public,
            "files": [{"path": rel, "size": size, "sha256": sha} for rel, _, size, sha in job.files],
        }
        return self._call("POST", "/uploads", json=body)

    def _send(self, job: Job, state: dict[str, Any]) -> bool:
        """Send what the server lacks; True when the server should be asked again before completing."""
        again = False
        self._current = sum(f.get("received", 0) for f in state["files"])
        for item in state["files"]:
            full = job.files[item["index"]][1]
            if "parts" in item:
                again |= self._send_parts(full, item)
            else:
                self._send_chunks(state["id"], full, item, state["chunk_bytes"])
        return again

    def _send_chunks(self, upload_id: str, full: str, item: dict[str, Any], chunk_bytes: int) -> None:
        offset, size = item["received"], item["size"]
        with open(full, "rb") as handle:
            handle.seek(offset)
            while offset < size:
                data = handle.read(min(chunk_bytes, size - offset))
                if not data:
                    raise Refused(f"{full} is shorter than when it was hashed")
                self._call("PUT", f"/uploads/{upload_id}/files/{item['index']}", params={"offset": offset},
                           content=self._body(data), headers={"X-Runcast-Chunk-Sha256": hashlib.sha256(data).hexdigest()})
                offset += len(data)
                self._sent(len(data))

    def _send_parts(self, full: str, item: dict[str, Any]) -> bool:
        part_bytes = item["part_bytes"]
        with open(full, "rb") as handle:
            for part in item["parts"]:
                offset = (part["number"] - 1) * part_bytes
                handle.seek(offset)
                data = handle.read(min(part_bytes, item["size"] - offset))
                md5 = base64.b64encode(hashlib.md5(data, usedforsecurity=False).digest()).decode()
                try:
                    response = self._bucket.put(part["url"], content=self._body(data),
                                                headers={"Content-MD5": md5, "Content-Length": str(len(data))})
                except self._httpx.TransportError as exc:
                    raise _Retry(f"{type(exc).__name__}: {exc}") from exc
                if response.status_code >= 300:
                    raise _Retry(f"the object store answered HTTP {response.status_code} to a part")
                self._sent(len(data))
        return bool(item["parts"])

    def _call(self, method: str, path: str, **kwargs: Any) -> dict[str, Any]:
        httpx = self._httpx
        try:
            response = self._client.request(method, f"/api/v1/runs/{self.run_id}{path}", **kwargs)
        except httpx.TransportError as exc:
            raise _Retry(f"{type(exc).__name__}: {exc}") from exc
        status = response.status_code
        if status < 300:
            return cast("dict[str, Any]", response.json())  # the uploads API answers JSON objects (docs/api.md)
        try:
            message = response.json()["error"]["message"]
        except (ValueError, KeyError, TypeError):
            message = response.text[:200]
        if status in (404, 408, 409, 429) or status >= 500:
            raise _Retry(f"HTTP {status}: {message}")
        raise Refused(f"HTTP {status}: {message}")

    def _body(self, data: bytes) -> bytes | Iterator[bytes]:
        """``data`` as a request body: paced in slices when ``bandwidth`` is set."""
        if not self.config.bandwidth:
            return data

        def slices() -> Iterator[bytes]:
            view = memoryview(data)
            for start in range(0, len(data), _PACE_SLICE):
                piece = view[start:start + _PACE_SLICE]
                self._pace(len(piece))
                yield bytes(piece)
                self._bytes_sent += len(piece)
                self._progress()

        return slices()

    def _pace(self, size: int) -> None:
        """Sleep until sending ``size`` more bytes keeps the average within ``bandwidth`` per second."""
        rate = self.config.bandwidth or 0.0
        now = time.monotonic()
        if self._paced_from is None:
            self._paced_from = now
        wait = self._paced_bytes / rate - (now - self._paced_from)
        self._paced_bytes += size
        if wait > 0 and self._closing.wait(wait):
            raise _Closing

    def _sent(self, size: int) -> None:
        """``size`` bytes acknowledged by the server (or the store)."""
        if not self.config.bandwidth:
            self._bytes_sent += size  # paced bodies count their slices as they go
        self._current += size
        self._progress()

    def _progress(self) -> None:
        self._progress_at = time.monotonic()


class _Closing(Exception):
    """The run closed while a checkpoint was waiting or being sent."""
