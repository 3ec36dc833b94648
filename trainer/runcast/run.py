"""``Run``: what a training job holds to broadcast itself, and ``init`` which makes one.

Every verb validates its arguments on the caller's thread (a mistake raises there)
and then only appends to a bounded in-memory queue: no I/O, no JSON, no lock
beyond the queue's own, no device sync. The sender thread does the rest. Service
problems never reach the caller: they end in the spool, or as counted drops.
"""

from __future__ import annotations

import itertools
import logging
import operator
import os
import shutil
import time
from collections import deque
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from types import TracebackType
from typing import Any, Final, Self

from . import events, lifecycle, runtime, system
from .events import MAX_METRICS_PER_EVENT, MAX_STEP, EventError, check_key, new_id
from .handshake import DEFAULT_START_TIMEOUT, InitError, whoami
from .overflow import FORMAT as OVERFLOW_FORMAT
from .overflow import Overflow
from .policy import check_policy, put_policy
from .record import Synced
from .sender import Counters, Item, Sender, SenderConfig, Wakeup
from .spool import Spool, SpoolBusy, default_dir
from .transport import Transport, make_transport, public_url
from .upload import Job, UploadConfig, Uploader, UploadStats
from .values import Deferred, coerce, int_to_float, json_object, read_deferred

log = logging.getLogger("runcast")

__all__ = ["InitError", "Run", "RunStats", "init"]


@dataclass(frozen=True)
class RunStats:
    """Event counts of a run (every event type, including run_started, heartbeats, finished).

    ``logged``: accepted by the run. ``sent``: acknowledged by the service (``replayed``
    of them from the spool). ``spooled``: written to the spool. ``spilled``: written to
    the overflow file by ``log()`` because the queue was full or behind (they are sent
    from there in order). ``dropped``: lost, because the service rejected them or the
    disk could not take them (each cause is logged once); the run reports the count to
    the service, and its page shows the hole. ``queued``: waiting in memory right now.
    ``ignored``: metric values ``log()`` left out because their key was already logged at
    that step or a later one (one warning per key).
    """

    logged: int
    sent: int
    spooled: int
    dropped: int
    replayed: int
    queued: int
    spilled: int = 0
    ignored: int = 0  # metric values log() left out: a step at or below the key's last one (docs/sdk.md)
    uploads: UploadStats = field(default_factory=UploadStats)  # checkpoints published over HTTP (upload.py)

    @property
    def has_hole(self) -> bool:
        """True when some events of this run will never reach the service."""
        return self.dropped > 0


class Run:
    """A run segment being broadcast. Make one with ``runcast.init``."""

    def __init__(
        self,
        *,
        run_id: str,
        started: dict[str, Any],
        url: str | None,
        rank: int,
        enabled: bool,
        transport: Transport | None,
        spool_dir: Path,
        flush_interval: float,
        batch_size: int,
        max_queue: int,
        finish_timeout: float,
        heartbeat_interval: float,
        retry_initial: float,
        retry_max: float,
        checkpoint_dir: Path | None = None,
        segment: str | None = None,
        disabled: bool = False,
        upload: UploadConfig | None = None,
    ) -> None:
        self.id = run_id
        self.checkpoint_dir = checkpoint_dir
        self.segment = segment or new_id()
        self._system: system.SystemSampler | None = None  # this rank's system metrics (runcast.system)
        self.url = url
        self.rank = rank
        self.enabled = enabled
        self.project: str = started["project"]
        self.name: str = started["name"]
        self.tags: tuple[str, ...] = tuple(started.get("tags") or ())
        self.group: str | None = started.get("group")
        self.job_type: str | None = started.get("job_type")
        self.notes: str | None = started.get("notes")
        self._config = Synced("config", started["config"], self._update)
        self._summary = Synced("summary", {}, self._update)
        self._disabled = disabled
        self._api: tuple[str, str | None] | None = None  # (server, token) of set_policy; set by init()
        self._ignored = 0
        self._ignored_keys: set[str] = set()
        self._finish_timeout = finish_timeout
        self._wake_at = batch_size if flush_interval > 0 else 1  # the queue length that wakes the sender
        self._max_queue = max_queue
        self._queue: deque[Item] = deque()
        self._seq = itertools.count()  # the segment's event numbers, shared with the sender (heartbeats)
        self._wake = Wakeup()
        self._counters = Counters()
        self._overflow: Overflow | None = None
        self._spilling = False  # an overflow episode is open: events go to disk, in order
        self._spill_after = max(2.0, 2 * flush_interval)  # the oldest queued event's age that starts one
        self._full_warned = False
        self._closed_warned = False
        resume_step = started.get("resume_step")
        self._step = -1 if resume_step is None else resume_step - 1
        self._key_steps: dict[str, int] = {}
        self._keys: set[str] = set()
        self._live = enabled
        self._closed = False
        self._sender: Sender | None = None
        self._uploader: Uploader | None = None
        self._snapshots: Path | None = None  # hard links to checkpoints waiting for their upload
        # pruned reports waiting for the uploads submitted before them: (uploads submitted then, body)
        self._prunes: list[tuple[int, dict[str, Any]]] = []
        if not enabled:
            return
        self._put("run_started", time.time(), None, started)
        config = SenderConfig(
            run=run_id,
            segment=self.segment,
            batch_size=batch_size,
            flush_interval=flush_interval,
            heartbeat_interval=heartbeat_interval,
            retry_initial=retry_initial,
            retry_max=retry_max,
            spool_dir=spool_dir,
            spool_meta={
                "format": 1,
                "run": run_id,
                "segment": self.segment,
                "project": self.project,
                "name": self.name,
                "url": transport.url if transport is not None else None,
                "created": time.time(),
                "overflow": OVERFLOW_FORMAT,
            },
        )
        spool = _open_spool(spool_dir, config.spool_meta)  # made now: the overflow file lives in it
        if spool is not None:
            self._overflow = Overflow(spool.path)
            self._snapshots = spool.path / "checkpoints"
        self._sender = Sender(
            config, self._queue, self._wake, transport, self._counters, self._heartbeat, self._overflow, self._lost,
            spool,
        )
        self._sender.start()
        if upload is not None:
            self._uploader = Uploader(upload, run_id, self.segment)
        lifecycle.register(self)

    # --- verbs ---------------------------------------------------------------------------

    def log(self, metrics: Mapping[str, Any], step: int | None = None) -> None:
        """Record ``metrics`` (name -> number or one-element tensor) at ``step``.

        ``step`` defaults to the highest step logged so far plus one (the first is 0,
        or ``resume_step`` for a resumed run).
        NaN and +-Inf are recorded as such. Never blocks and never raises for a
        service problem or for the order of steps: a name logged again at its last step
        or an earlier one is left out (the first value at a step is the one kept, as the
        server keeps it), with one warning per name; ``stats.ignored`` counts them.
        """
        if self._disabled:
            return
        if self._prunes:
            self._release_prunes()
        if step is None:
            step = self._step + 1
        elif type(step) is not int or step < 0 or step > MAX_STEP:
            step = _check_step(step)
        if type(metrics) is not dict and not isinstance(metrics, Mapping):
            raise TypeError(f"metrics must be a dict of name -> number, got {type(metrics).__name__}")
        if not metrics or len(metrics) > MAX_METRICS_PER_EVENT:
            raise ValueError(f"log() takes 1 to {MAX_METRICS_PER_EVENT} metrics, got {len(metrics)}")
        key_steps = self._key_steps
        keys = self._keys
        values: dict[str, float | Deferred] = {}
        for key, value in metrics.items():
            if key not in keys:
                self._new_key(key)
            last = key_steps.get(key)
            if last is not None and step <= last:
                self._ignore(key, step, last)
                continue
            kind = type(value)
            if kind is float:
                values[key] = value
            elif kind is int:
                values[key] = int_to_float(key, value)
            else:
                values[key] = coerce(key, value)
        if not values:
            return
        key_steps.update(dict.fromkeys(values, step))
        self._step = max(self._step, step)
        self._put("metrics", time.time(), step, values)

    @property
    def config(self) -> Synced:
        """The run's config: a mapping; setting keys (``run.config["lr"] = x``, ``run.config.update(d)``)
        sends them, and the server replaces those keys of the stored config."""
        return self._config

    @config.setter
    def config(self, value: Any) -> None:
        self._config.update(value)

    @property
    def summary(self) -> Synced:
        """Figures that describe the whole run (best accuracy, final loss, runtime): a mapping whose
        keys are sent when set; shown on the run page and in ``GET /runs/{id}`` under ``summary``."""
        return self._summary

    def define_metric(self, name: str, *, x: str = "step", summary: str = "last") -> None:
        """Declare metric ``name``: its x axis (``step``, ``tokens`` or ``time``) and the figure
        the run's summary shows for it (``min``, ``max``, ``last`` or ``none``), computed by the
        server over every stored point. A value set in ``run.summary`` wins over it."""
        try:
            define = events.check_define({name: {"x": x, "summary": summary}})
        except EventError as exc:
            raise ValueError(f"define_metric: {exc.message} ({exc.field})") from None
        self._update({"define": define})

    def _update(self, body: dict[str, Any]) -> None:
        """Queue an ``update`` event (config, summary or define), checked here first."""
        self._check("update", body)
        self._put("update", time.time(), None, body)

    def checkpoint(
        self,
        path: str | os.PathLike[str],
        step: int,
        metrics: Mapping[str, Any] | None = None,
        public: bool = True,
        status: str = "available",
        sha256: str | None = None,
    ) -> None:
        """Record a checkpoint saved at ``path`` (a file, or a directory of files) at ``step``.

        The size is read now; a file's sha256 is computed by the sender thread before
        the event is sent (so do not overwrite the file right away). FileNotFoundError
        if ``path`` does not exist. ``status="pruned"`` records that a checkpoint logged
        earlier was deleted (its file may be gone: size 0, no sha256).

        With ``init(checkpoint_dir=DIR)``, a checkpoint outside ``DIR/<project>`` is copied by
        the sender thread to ``DIR/<project>/<run id>/step-<step>/<name>`` (hashed while copying) and
        the event reports the copy; the original stays. A pruned one names that copy,
        and the sender deletes the copy.

        ``sha256``: the file's digest, computed by the caller when it saved the file,
        for a path that is rewritten by later saves (Lightning's ``last.ckpt``); the
        sender then records it instead of hashing the file later.
        """
        path = os.path.abspath(os.fspath(path))
        copy_to = self._copy_target(path, step) if self._live else None
        if status == "pruned" and not os.path.exists(path):
            is_dir, size = False, 0
        else:
            info = os.stat(path)
            is_dir = os.path.isdir(path)
            size = _tree_size(path) if is_dir else info.st_size
        body = {
            "step": _check_step(step),
            "path": path,
            "size": size,
            "sha256": sha256,
            "metrics": self._numbers(metrics or {}, "metrics"),
            "public": public,
            "status": status,
        }
        self._check("checkpoint", body)
        if self._uploader is not None and self._live and self._uploader.decided(1.0) is not False:
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
        if self._live and not is_dir and status == "available" and sha256 is None:
            body["_hash"] = True
        self._put("checkpoint", time.time(), None, body)

    def _upload(self, body: dict[str, Any], is_dir: bool) -> None:
        """Hand a checkpoint to the uploader (the server records its event once verified)."""
        uploader = self._uploader
        assert uploader is not None
        if body["status"] == "pruned":
            # After the uploads before it, in the trainer's order: the server records an upload when it completes.
            self._prunes.append((uploader.queued, body))
            self._release_prunes()
            return
        for job in uploader.take_fallback():
            self._by_path(job)
        seq = next(self._seq)
        source, snapshot = self._snapshot(body["path"], is_dir, seq)
        uploader.submit(Job(path=body["path"], step=body["step"], seq=seq, ts=time.time(), size=body["size"],
                            is_dir=is_dir, metrics=body["metrics"], public=body["public"], source=source,
                            snapshot=snapshot))

    def _release_prunes(self, final: bool = False) -> None:
        """Send the pruned reports once the uploads submitted before them are settled (all when ``final``)."""
        uploader = self._uploader
        assert uploader is not None
        for job in uploader.take_fallback():
            self._by_path(job)
        waiting = []
        for after, body in self._prunes:
            if not final and uploader.settled < after:
                waiting.append((after, body))
                continue
            path, step = body["path"], body["step"]
            # name the path the server recorded it under
            body["path"] = uploader.recorded.get(
                (path, step), f"{self.project}/{self.id}/step-{step}/{os.path.basename(path)}")
            self._put("checkpoint", time.time(), None, body)
        self._prunes = waiting

    def _snapshot(self, path: str, is_dir: bool, seq: int) -> tuple[str | None, str | None]:
        """Hard links to the checkpoint's files as they are now, so that a trainer pruning it before
        its upload got to it loses nothing: (what to read, the directory to remove later). (None,
        None) where links cannot be made (no spool, or another filesystem): the upload reads ``path``."""
        if self._snapshots is None:
            return None, None
        target = self._snapshots / str(seq)
        try:
            target.mkdir(parents=True)
            if not is_dir:
                link = target / os.path.basename(path)
                os.link(path, link)
                return str(link), str(target)
            tree = target / "tree"
            real_root = os.path.realpath(path)
            for folder, _, names in os.walk(path):
                here = tree / os.path.relpath(folder, path)
                here.mkdir(parents=True, exist_ok=True)
                for name in names:
                    full = os.path.join(folder, name)
                    real = os.path.realpath(full)
                    if os.path.commonpath([real_root, real]) != real_root or not os.path.isfile(real):
                        log.warning("runcast: %s leads out of the checkpoint directory (or is not a file): left out",
                                    full)
                        continue
                    os.link(real, here / name)  # a link inside the tree becomes the file it names
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
        # The server serves a project's checkpoints only from <storage root>/<project>/.
        root = os.path.join(os.path.abspath(self.checkpoint_dir), self.project)
        if os.path.commonpath([root, path]) == root:
            return None  # already in the project's storage directory: reported in place
        name = os.path.basename(path)
        if not name:
            raise ValueError(f"checkpoint path {path!r} has no file name")
        return os.path.join(root, self.id, f"step-{_check_step(step)}", name)

    def data_mix(self, weights: Mapping[str, Any], step: int) -> None:
        """Record that from ``step`` on, data is drawn with ``weights`` (source -> weight >= 0)."""
        body = {"step": _check_step(step), "weights": self._numbers(weights, "weights")}
        self._check("data_mix", body)
        self._put("data_mix", time.time(), None, body)

    def manifest(self, manifest: Mapping[str, Any], version: str, step: int | None = None) -> None:
        """Record a dataset manifest (a JSON object, <= 1 MiB) under ``version``."""
        body = {
            "step": _check_step(step, optional=True),
            "version": version,
            "manifest": json_object(manifest, "manifest"),
        }
        self._check("manifest", body)
        self._put("manifest", time.time(), None, body)

    def note(self, text: str, step: int | None = None) -> None:
        """Add an operator note to the run's timeline."""
        body = {"step": _check_step(step, optional=True), "text": text}
        self._check("note", body)
        self._put("note", time.time(), None, body)

    def set_policy(self, policy: Mapping[str, Any] | None = None, /, *, timeout: float = 10.0,
                   **settings: Any) -> dict[str, Any] | None:
        """Change what the public sees of this run, now (``runcast.policy``; e.g.
        ``run.set_policy(metrics=["train/*"], checkpoints="metadata")``; ``None`` returns a
        setting to the project's default). Returns the policy in force; None for a disabled run.

        Unlike the data verbs this asks the server directly (``PUT /api/v1/runs/{id}/policy``)
        and raises when it cannot: a withdrawal must not wait behind queued data or sit in a
        spool while the data it should hide is published. The run's first event must have
        reached the server (``flush()`` first, right after ``init``), else the server answers 404.
        """
        change = check_policy({**(policy or {}), **settings})
        if self._disabled or not self.enabled:
            return None
        if self._api is None:
            raise RuntimeError("set_policy needs a server (server= or RUNCAST_SERVER); pass policy= to init() "
                               "for an offline run")
        return put_policy(self._api[0], self._api[1], f"/runs/{self.id}/policy", change, timeout)["policy"]  # type: ignore[no-any-return]

    def flush(self, timeout: float | None = 10.0) -> bool:
        """Wait until everything logged so far was sent or spooled; True if nothing is left unsent.

        Checkpoints handed to the uploader count: a trainer that flushes and then dies has
        published the checkpoints it reported before.
        """
        if self._sender is None or self._closed:
            return not self._queue
        uploader = self._uploader
        if uploader is not None and uploader.settled < uploader.queued:
            deadline = None if timeout is None else time.monotonic() + timeout
            target = uploader.queued
            while uploader.settled < target and (deadline is None or time.monotonic() < deadline):
                time.sleep(0.02)
            if deadline is not None:
                timeout = max(0.0, deadline - time.monotonic())
        if self._prunes:  # pruned reports wait for the uploads before them
            self._release_prunes()
            if self._prunes:
                return False
        return self._sender.flush(timeout)

    def finish(self, status: str = "finished", timeout: float | None = None) -> None:
        """Close the run with ``status`` (finished, failed, killed). Idempotent.

        Sends what is queued within ``timeout`` (default ``finish_timeout``) seconds;
        what cannot be sent in time stays in the spool for ``runcast sync``.
        """
        if status not in events.FINAL_STATUSES:
            raise ValueError(f"status must be one of {', '.join(events.FINAL_STATUSES)}, got {status!r}")
        if self._closed:
            return
        if self._uploader is not None and self._live:  # checkpoints first: the run ends after them
            self._uploader.close(self._finish_timeout if timeout is None else timeout)
            self._release_prunes(final=True)
        self._closed = True
        self._live = False
        lifecycle.unregister(self)
        if self._system is not None:
            self._system.stop()
        if self._sender is None:
            return
        step = self._step if self._step >= 0 else None
        self._put("finished", time.time(), None, {"step": step, "status": status, "lost": self._lost() or None},
                  final=True)
        if self._sender.close(self._finish_timeout if timeout is None else timeout):
            return
        where = self._sender.unsent_dir
        if where is not None and self._sender.offline:
            log.warning(
                "runcast: run %s was recorded offline in %s. Send it with: runcast sync %s --server URL",
                self.id,
                where,
                where,
            )
        elif where is not None:
            log.warning(
                "runcast: run %s could not send everything in time; the rest is spooled in %s. "
                "Send it with: runcast sync %s",
                self.id,
                where,
                where,
            )

    @property
    def stats(self) -> RunStats:
        """A snapshot of the event counts."""
        c = self._counters
        uploads = self._uploader.stats() if self._uploader is not None else UploadStats()
        return RunStats(c.logged, c.sent, c.spooled, self._lost(), c.replayed, len(self._queue), c.spilled,
                        self._ignored, uploads)

    @property
    def finished(self) -> bool:
        """True once ``finish()`` was called (also at exit)."""
        return self._closed

    @property
    def step(self) -> int:
        """The highest step logged so far (-1 before the first)."""
        return self._step

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self, kind: type[BaseException] | None, value: BaseException | None, tb: TracebackType | None
    ) -> None:
        if kind is None:
            self.finish("finished")
        else:
            self.finish("killed" if issubclass(kind, KeyboardInterrupt) else "failed")

    def __repr__(self) -> str:
        return f"Run(id={self.id!r}, project={self.project!r}, name={self.name!r}, rank={self.rank})"

    # --- internals ---------------------------------------------------------------------

    def _put(self, kind: str, ts: float, step: int | None, body: Any, *, final: bool = False) -> None:
        if not self._live and not final:
            if self._closed and not self._closed_warned:
                self._closed_warned = True
                log.warning("runcast: run %s is finished; further events are ignored", self.id)
            return
        queue = self._queue
        if self._spilling:
            # Stay on disk until the sender has read back all of it: the order is kept.
            if not self._overflow.try_close():  # type: ignore[union-attr]
                self._spill(kind, ts, step, body)
                return
            self._spilling = False
        elif len(queue) >= self._max_queue or self._behind(queue, ts):
            if self._start_spilling():
                self._spill(kind, ts, step, body)
                return
            if len(queue) >= self._max_queue and not final:  # the finished event always gets in
                self._counters.dropped_full += 1
                if not self._wake.pending:
                    self._wake.set()  # the sender reports the hole at once
                if not self._full_warned:
                    self._full_warned = True
                    log.warning(
                        "runcast: the event queue of run %s is full (max_queue=%d) and the overflow file cannot "
                        "be written: events are being dropped; run.stats.dropped counts them",
                        self.id,
                        self._max_queue,
                    )
                return
        queue.append((next(self._seq), kind, ts, step, body))
        self._counters.logged += 1
        if len(queue) >= self._wake_at and not self._wake.pending:
            self._wake.set()

    def _behind(self, queue: deque[Item], ts: float) -> bool:
        """The oldest queued event has waited longer than the sender should ever let it."""
        try:
            return ts - queue[0][2] > self._spill_after
        except IndexError:  # empty (the sender may take the last item while we look)
            return False

    def _start_spilling(self) -> bool:
        """Open an overflow episode (the sender is behind); False if the disk refuses."""
        overflow = self._overflow
        if overflow is None:
            return False
        try:
            overflow.open()
        except OSError as exc:
            if not self._full_warned:
                self._full_warned = True
                log.error("runcast: cannot write the overflow file in %s (%s)", overflow.directory, exc)
            return False
        self._spilling = True
        return True

    def _spill(self, kind: str, ts: float, step: int | None, body: Any) -> None:
        """Write one event to the overflow file (a device tensor is read now: the queue is behind)."""
        if kind == "metrics":
            body = read_deferred(body)
        overflow = self._overflow
        assert overflow is not None
        c = self._counters
        c.logged += 1
        c.spilled += 1
        if overflow.put((next(self._seq), kind, ts, step, body)) and not self._wake.pending:
            self._wake.set()

    def _lost(self) -> int:
        """Events that will never reach the service (rejected, or not writable to disk)."""
        c = self._counters
        failed = self._overflow.failed if self._overflow is not None else 0
        return c.dropped + c.dropped_full + failed

    def _ignore(self, key: str, step: int, last: int) -> None:
        self._ignored += 1
        if key not in self._ignored_keys:
            self._ignored_keys.add(key)
            log.warning(
                "runcast: metric %r was already logged at step %d; its value at step %d is left out (a metric "
                "keeps the first value logged at each step, and its steps must grow). Further cases of %r are "
                "counted in run.stats.ignored, not logged",
                key, last, step, key,
            )

    def _new_key(self, key: Any) -> None:
        try:
            check_key(key, "metrics")
        except EventError as exc:
            raise ValueError(f"bad metric name {key!r}: {exc.message}") from None
        self._keys.add(key)

    def _numbers(self, raw: Mapping[str, Any], what: str) -> dict[str, float | str]:
        if not isinstance(raw, Mapping):
            raise TypeError(f"{what} must be a dict of name -> number, got {type(raw).__name__}")
        out: dict[str, float | str] = {}
        for key, value in raw.items():
            check_key(key, what)
            number = coerce(key, value)
            if isinstance(number, Deferred):
                number = number.resolve()  # rare events: reading the device here is fine
            out[key] = events.encode_value(number)
        return out

    def _check(self, kind: str, body: Mapping[str, Any]) -> None:
        events.validate_event(
            {"type": kind, "run": self.id, "segment": self.segment, "seq": 0, "ts": time.time(), **body}
        )

    def _heartbeat(self) -> Item:
        body: dict[str, Any] = {"step": self._step if self._step >= 0 else None}
        lost = self._lost()
        if lost:
            body["lost"] = lost
        return (next(self._seq), "heartbeat", time.time(), None, body)


MODES: Final = ("online", "offline", "disabled")


def init(
    project: str | None = None,
    name: str | None = None,
    config: Any = None,
    *,
    server: str | None = None,
    transport: str | Transport | None = None,
    token: str | None = None,
    mode: str | None = None,
    on_error: str = "raise",
    id: str | None = None,
    resume: str | None = None,
    resume_step: int | None = None,
    tags: Sequence[str] | None = None,
    group: str | None = None,
    job_type: str | None = None,
    notes: str | None = None,
    visibility: str = "public",
    seed: int | None = None,
    dir: str | os.PathLike[str] | None = None,
    spool_dir: str | os.PathLike[str] | None = None,
    start_timeout: float = DEFAULT_START_TIMEOUT,
    flush_interval: float = 0.0,
    batch_size: int = 1000,
    max_queue: int = 100_000,
    finish_timeout: float = 30.0,
    all_ranks: bool = False,
    capture_code: bool = True,
    rank: int | None = None,
    heartbeat_interval: float = 30.0,
    retry_initial: float = 0.5,
    retry_max: float = 30.0,
    alerts: dict[str, Any] | None = None,
    checkpoint_dir: str | os.PathLike[str] | None = None,
    public_paths: bool = False,
    system_metrics: float | bool | None = None,
    upload: bool = True,
    upload_bandwidth: float | None = None,
    policy: Mapping[str, Any] | None = None,
) -> Run:
    """Start broadcasting a run (or, with ``resume=RUN_ID``, a new segment of one). See docs/sdk.md.

    Online (the default), ``init`` asks the server once (``GET /api/v1/whoami``, at most
    ``start_timeout`` seconds): a refused token, a token of another project than ``project``
    or a run id another project holds raise ``InitError`` here (``on_error="warn"``: logged,
    and the run is recorded offline instead). An unreachable server is not an error: the run
    is spooled and sent when the server answers. ``project`` defaults to ``RUNCAST_PROJECT``,
    then to the token's project; ``name`` to ``RUNCAST_NAME``, then to ``run-<id>``.

    ``mode``: ``online``; ``offline`` (nothing is sent: the run is written to the spool for
    ``runcast sync``); ``disabled`` (nothing is recorded; every verb returns at once). Default:
    ``RUNCAST_MODE`` or ``online``. ``id``: the id of a new run (8-64 characters of
    A-Za-z0-9_-); ``resume=ID`` continues run ID after its stored last step (``resume_step``
    to restart from an earlier checkpoint instead). ``tags`` (``RUNCAST_TAGS``, comma
    separated), ``group`` (``RUNCAST_GROUP``), ``job_type`` and ``notes`` are shown on the
    runs page, which filters by tag and group. ``dir`` (or ``spool_dir``): where the run's
    spool lives (default ``RUNCAST_SPOOL_DIR`` or ``~/.cache/runcast/spool``).

    ``public_paths``: show this run's filesystem paths, host name, user and process id to
    every reader (by default only readers with a token of the run's project see them).
    ``checkpoint_dir`` (or ``RUNCAST_CHECKPOINT_DIR``): the storage directory the server
    serves checkpoints from, as this machine sees it; checkpoints saved elsewhere are
    copied into it off the training thread (``Run.checkpoint``, docs/artifacts.md).

    ``policy``: the run's publication policy (what the public sees of it, ``runcast.policy``;
    docs/sdk.md#publication-policy), sent with the run's first event so that no data is
    published before it; ``Run.set_policy`` changes it later.

    ``system_metrics``: seconds between system samples on every rank (default
    ``RUNCAST_SYSTEM_INTERVAL`` or 10; ``False`` for none), ``runcast.system``.

    ``upload`` (without ``checkpoint_dir``, with a ``server``): checkpoints are published to
    the server over HTTP on a worker thread of their own, unless the server finds the very
    bytes in its storage; ``upload_bandwidth`` caps the sending in bytes per second.
    """
    project = project or os.environ.get("RUNCAST_PROJECT") or None
    name = name or os.environ.get("RUNCAST_NAME") or None
    mode = mode or os.environ.get("RUNCAST_MODE") or "online"
    if mode not in MODES:
        raise ValueError(f"mode must be one of {', '.join(MODES)}, got {mode!r}")
    if on_error not in ("raise", "warn"):
        raise ValueError(f"on_error must be 'raise' or 'warn', got {on_error!r}")
    if tags is None and os.environ.get("RUNCAST_TAGS"):
        tags = [t.strip() for t in os.environ["RUNCAST_TAGS"].split(",") if t.strip()]
    group = group or os.environ.get("RUNCAST_GROUP") or None
    if dir is not None and spool_dir is not None:
        raise ValueError("give dir= or spool_dir= (the same thing), not both")
    spool_dir = dir if dir is not None else spool_dir
    server = server or os.environ.get("RUNCAST_SERVER") or None
    if checkpoint_dir is None:
        checkpoint_dir = os.environ.get("RUNCAST_CHECKPOINT_DIR") or None
    token = token or os.environ.get("RUNCAST_TOKEN") or None
    if rank is None:
        rank = _env_rank()
    enabled = (rank == 0 or all_ranks) and mode != "disabled"
    _check_positive(heartbeat_interval=heartbeat_interval, retry_initial=retry_initial, retry_max=retry_max,
                    start_timeout=start_timeout)
    if isinstance(flush_interval, bool) or not isinstance(flush_interval, (int, float)) or not flush_interval >= 0:
        raise ValueError("flush_interval must be 0 (send as soon as the sender is idle) or a positive number of seconds")
    if upload_bandwidth is not None and not (isinstance(upload_bandwidth, (int, float)) and upload_bandwidth > 0):
        raise ValueError("upload_bandwidth must be a positive number of bytes per second")
    if finish_timeout < 0:
        raise ValueError("finish_timeout must not be negative")
    for label, number in (("batch_size", batch_size), ("max_queue", max_queue)):
        if isinstance(number, bool) or not isinstance(number, int) or number < 1:
            raise ValueError(f"{label} must be a positive integer")
    for label, given in (("resume", resume), ("id", id)):
        if given is not None and (not isinstance(given, str) or not events.ID_RE.match(given)):
            raise ValueError(f"{label} must be a run id (8-64 characters of A-Z, a-z, 0-9, '_' or '-')")
    if resume is not None and id is not None and resume != id:
        raise ValueError("give resume=ID to continue a run, or id=ID for a new one, not both")
    system_interval = system.interval_from(system_metrics)
    # The ranks of one launch agree on the ids; a disabled run has none to agree on.
    launch = None if all_ranks or mode == "disabled" else system.launch_identity(resume or id)
    run_id = launch.run if launch is not None else resume or id or new_id()
    if seed is not None and not isinstance(seed, bool) and hasattr(seed, "__index__"):
        seed = operator.index(seed)  # numpy integers
    resume_step = _check_step(resume_step, optional=True, field="resume_step")

    sink: Transport | None = None
    base: str | None = None
    if enabled and mode == "online":
        if isinstance(transport, str):
            sink = make_transport(transport, token)
            base = transport
        elif transport is not None:
            sink = transport
        elif server:
            sink = make_transport(server, token)
            base = server
        if sink is not None and base is not None and base.startswith("http"):
            try:
                project, resume_step = _ask_server(base, token, project, run_id, resume, id, resume_step, start_timeout)
            except InitError as exc:
                if on_error == "raise":
                    sink.close()
                    raise
                log.error("runcast: %s. The run is recorded offline instead; send it later with runcast sync", exc)
                sink.close()
                sink, base = None, None
        elif sink is None:
            log.info("runcast: no server given (server= or RUNCAST_SERVER); the run is recorded offline")
    if project is None:
        if enabled:
            raise ValueError("project is required: pass project= or set RUNCAST_PROJECT (online, it defaults to "
                             "the token's project once the server answers)")
        project = "disabled" if mode == "disabled" else "unknown"
    started: dict[str, Any] = {
        "project": project,
        "name": name or f"run-{run_id[:8]}",
        "config": json_object(config, "config"),
        "code": {},
        "env": {},
        "seed": seed,
        "resume_step": resume_step,
        "visibility": visibility,
    }
    if alerts is not None:  # per-run detector overrides (docs/alerts.md)
        started["alerts"] = json_object(alerts, "alerts")
    if not isinstance(public_paths, bool):
        raise ValueError("public_paths must be True or False")  # noqa: TRY004  (init's documented error for a bad option)
    if public_paths:
        started["public_paths"] = True
    if policy is not None:
        started["policy"] = check_policy(policy)
    if tags is not None:
        if isinstance(tags, str) or not isinstance(tags, Sequence):
            raise ValueError("tags must be a list of strings")
        started["tags"] = list(tags)
    for label, text in (("group", group), ("job_type", job_type), ("notes", notes)):
        if text is not None:
            started[label] = text
    checked = events.validate_event({"type": "run_started", "run": run_id, "segment": run_id, "seq": 0, "ts": 0,
                                     **started})
    for label in ("tags", "group", "job_type", "notes"):
        if label in started:
            started[label] = checked.get(label)
    if enabled:
        started["env"] = runtime.storable(runtime.environment(rank))
        started["code"] = runtime.storable(runtime.code_revision()) if capture_code else {}
    publish = None
    if sink is not None and base and upload and checkpoint_dir is None:
        publish = UploadConfig(base, token, upload_bandwidth, retry_initial, retry_max)
    run = Run(
        run_id=run_id,
        started=started,
        url=_run_url(run_id, base if sink is not None else None, server, transport, enabled, launch, mode),
        rank=rank,
        enabled=enabled,
        transport=sink,
        spool_dir=Path(spool_dir).expanduser() if spool_dir is not None else default_dir(),
        flush_interval=flush_interval,
        batch_size=batch_size,
        max_queue=max_queue,
        finish_timeout=finish_timeout,
        heartbeat_interval=heartbeat_interval,
        retry_initial=retry_initial,
        retry_max=retry_max,
        checkpoint_dir=Path(checkpoint_dir).expanduser().absolute() if checkpoint_dir is not None else None,
        segment=launch.segment if launch is not None else None,
        disabled=mode == "disabled",
        upload=publish,
    )
    run._api = (base, token) if sink is not None and base and base.startswith("http") else None
    if enabled or launch is not None:
        # Every rank of an online launch sends its own samples; rank 0's init() decided for it alone.
        sampler_url = None if mode != "online" or (enabled and sink is None) else next(
            (u for u in (server, transport) if isinstance(u, str) and u.startswith("http")), None)
        run._system = system.start(system_interval, run=run_id, segment=run.segment, rank=rank,
                                   show_host=public_paths, url=sampler_url, token=token)
    return run


def _run_url(run_id: str, base: str | None, server: str | None, transport: object, enabled: bool,
             launch: object, mode: str | None) -> str | None:
    """The run's page: from the server this rank sends to, or for a rank that sends nothing, from
    the address rank 0 sends to when a launch identity makes both ranks' run the same one."""
    if base is None and not enabled and launch is not None and mode == "online":
        base = next((u for u in (server, transport) if isinstance(u, str) and u.startswith("http")), None)
    return f"{public_url(base.rstrip('/'))}/runs/{run_id}" if base else None


def _ask_server(
    base: str,
    token: str | None,
    project: str | None,
    run_id: str,
    resume: str | None,
    new_id: str | None,
    resume_step: int | None,
    timeout: float,
) -> tuple[str | None, int | None]:
    """The project and resume step after asking the server (InitError when it refuses)."""
    who = whoami(base, token, run_id if (resume or new_id) else None, timeout)
    if who is None:  # unreachable: not an error
        if resume is not None and resume_step is None:
            log.warning("runcast: cannot ask where run %s stopped; it continues from step 0 of a new segment "
                        "(pass resume_step= to say where)", resume)
        return project, resume_step
    if project is not None and project != who.project:
        raise InitError(f"the token is for project {who.project!r}, not {project!r}: use a token of {project!r} "
                        f"(runcast token create --project {project}) or leave project= out")
    if new_id is not None and who.run_exists:
        raise InitError(f"run {new_id!r} exists already: pass resume={new_id!r} to continue it")
    if resume is not None and resume_step is None and who.run_exists:
        resume_step = 0 if who.run_last_step is None else who.run_last_step + 1
    return who.project, resume_step


def _open_spool(spool_dir: Path, meta: dict[str, Any]) -> Spool | None:
    try:
        return Spool.create(spool_dir, meta)
    except (OSError, SpoolBusy) as exc:
        log.warning("runcast: cannot prepare the spool under %s (%s)", spool_dir, exc)
        return None


def _check_step(raw: Any, *, optional: bool = False, field: str = "step") -> Any:
    if raw is None and optional:
        return None
    if not isinstance(raw, (int, bool)) and hasattr(raw, "__index__"):
        raw = operator.index(raw)  # numpy integers
    try:
        return events.check_step(raw, field, optional=optional)
    except EventError as exc:
        raise ValueError(f"{field}: {exc.message}") from None


def _check_positive(**numbers: float) -> None:
    for label, number in numbers.items():
        if not isinstance(number, (int, float)) or isinstance(number, bool) or not number > 0:
            raise ValueError(f"{label} must be a positive number of seconds")


def _env_rank() -> int:
    raw = os.environ.get("RANK", "0")
    try:
        return int(raw)
    except ValueError:
        return 0


def _tree_size(path: str) -> int:
    total = 0
    for folder, _dirs, files in os.walk(path):
        for name in files:
            try:
                total += os.stat(os.path.join(folder, name)).st_size
            except OSError as exc:  # a file removed while the tree is summed
                log.debug("runcast: %s left out of the checkpoint size: %s", name, exc)
    return total
