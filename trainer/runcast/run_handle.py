"""``Run``: what a training job holds to broadcast itself (``runcast.init`` makes one, ``start.py``).

Every verb validates its arguments on the caller's thread (a mistake raises there)
and then only appends to a bounded in-memory queue (``sender/outbox.py``): no I/O, no JSON,
no lock beyond the queue's own, no device sync. The sender thread (``sender/thread.py``) does
the rest. Service problems never reach the caller: they end in the spool, or as counted
drops. What ``log()`` keeps is decided in ``steps.py``; checkpoints in ``checkpoints.py``;
samples, evaluations and media in ``outputs.py`` (images and histograms on the media worker);
name, tags, group, notes, config, summary and metric declarations in ``run_details.py``.
"""

from __future__ import annotations

import functools
import logging
import os
import time
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from types import TracebackType
from typing import Any, Self

from . import lifecycle, system
from .checkpoints import Checkpoints
from .commands import Commanded, Inbox
from .handshake import InitError, whoami
from .media import Media
from .media_worker import MediaWorker
from .outputs import Outputs
from .pending import Pending
from .run_details import Details
from .run_stats import RunStats
from .sender.blob_http import BlobClient
from .sender.config import SenderConfig
from .sender.outbox import Item, Outbox
from .sender.overflow import FORMAT as OVERFLOW_FORMAT
from .sender.overflow import Overflow
from .sender.spool import Spool
from .sender.spool_report import REPORT_TIMEOUT, announce_unsent
from .sender.thread import Sender
from .sender.transport import Transport
from .sender.upload import Uploader
from .sender.upload_jobs import UploadConfig
from .steps import Steps, checked_step
from .values import json_object, wire_numbers
from .wire import events
from .wire.events import new_id
from .wire.limits import MAX_COMMAND_MESSAGE_CHARS
from .wire.policy import check_policy, put_policy

log = logging.getLogger("runcast")

__all__ = ["InitError", "Run", "RunStats"]


class Run(Details, Commanded):
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
        batch_bytes: int = events.MAX_BATCH_BYTES,
        blobs: BlobClient | None = None,
        columns: bool = False,
    ) -> None:
        self.id = run_id
        self.checkpoint_dir = checkpoint_dir
        self.segment = segment or new_id()
        self._system: system.SystemSampler | None = None  # this rank's system metrics (runcast.system)
        self.url = url
        self.rank = rank
        self.enabled = enabled
        self.project: str | None = started.get("project")  # None: the token's, not known yet (server away)
        self._describe(started)
        self._disabled = disabled
        self._api: tuple[str, str | None] | None = None  # (server, token) of set_policy; set by init()
        self._finish_timeout = finish_timeout
        self._outbox = Outbox(run_id, flush_interval=flush_interval, batch_size=batch_size, max_queue=max_queue)
        self._steps = Steps(started.get("resume_step"), self._new_metric)
        self._pending = Pending()  # log(commit=False)
        self._checkpoints = Checkpoints(run_id=run_id, project=self._known_project, checkpoint_dir=checkpoint_dir,
                                        put=self._put, check=self._check, seq=self._outbox.seq)
        self._closed_warned = False
        self._live = enabled
        self._closed = False
        self._sender: Sender | None = None
        self._blobs = blobs  # images to the server: the media worker, and the sender's replay of the spool
        self._outputs = Outputs(put=self._put, check=self._check, seq=self._outbox.seq, step=lambda: self._steps.step,
                                live=lambda: self._live)
        self._inbox = Inbox(self._ack_command, lambda: self._steps.step)  # the team's commands (commands.py)
        if not enabled:
            return
        self._put("run_started", time.time(), None, started)
        config = SenderConfig(
            run=run_id, segment=self.segment, batch_size=batch_size, batch_bytes=batch_bytes, columns=columns,
            flush_interval=flush_interval, heartbeat_interval=heartbeat_interval, retry_initial=retry_initial,
            retry_max=retry_max, spool_dir=spool_dir,
            spool_meta={"format": 1, "run": run_id, "segment": self.segment, "project": self.project, "name": self.name,
                        "url": transport.url if transport is not None else None, "created": time.time(),
                        "overflow": OVERFLOW_FORMAT},
        )
        spool = Spool.create_or_warn(spool_dir, config.spool_meta)  # made now: the overflow file lives in it
        outbox = self._outbox
        self._outputs.start_worker = functools.partial(  # with the first image or histogram
            MediaWorker, run_id=run_id, segment=self.segment, queue_=outbox.queue, wake=outbox.wake, blobs=blobs,
            spool=spool.path if spool is not None else None, retry_initial=retry_initial, retry_max=retry_max,
            bandwidth=upload.bandwidth if upload is not None else None)
        if spool is not None:
            outbox.overflow = Overflow(spool.path)
            self._checkpoints.snapshots = spool.path / "checkpoints"
        self._sender = Sender(
            config, outbox.queue, outbox.wake, transport, outbox.counters, self._heartbeat, outbox.overflow,
            outbox.lost, spool, blobs=blobs, on_commands=self._inbox.receive,
        )
        self._sender.start()
        if upload is not None:
            self._checkpoints.uploader = Uploader(upload, run_id, self.segment)
        lifecycle.register(self)

    # --- verbs ---------------------------------------------------------------------------

    def log(self, metrics: Mapping[str, Any], step: int | None = None, commit: bool | None = None) -> None:
        """Record ``metrics`` (name -> number or one-element tensor; a nested dict is flattened
        with ``.``: ``{"train": {"loss": x}}`` is ``train.loss``, as W&B names it) at ``step``.

        ``step`` defaults to the highest step logged so far plus one (the first is 0,
        or ``resume_step + 1`` for a resumed run). ``commit=False`` holds the values for the next
        call without it, which records them at its step (``pending.py``).
        NaN and +-Inf are recorded as such. Never blocks and never raises for a
        service problem or for the order of steps: a name logged again at its last step
        or an earlier one is left out (the first value at a step is the one kept, as the
        server keeps it), with one warning per name; ``stats.ignored`` counts them.
        """
        if self._disabled:
            return
        if commit is False or self._pending.metrics:
            self._hold(metrics, step, commit)
            return
        if self._checkpoints.prunes:
            self._checkpoints.release_prunes()
        accepted = self._steps.accept(metrics, step, self._outputs.check_media)
        if accepted is not None:
            if accepted[1]:
                self._put("metrics", time.time(), accepted[0], accepted[1])
            if accepted[2]:  # runcast.Image, Table, Histogram: media events (outputs.py)
                self._outputs.media(accepted[2], accepted[0])
            self._dispatch()

    def log_samples(self, rows: Sequence[Mapping[str, Any]], step: int | None = None, key: str = "samples") -> None:
        """Record text generations at ``step`` (default: the run's current step), one ``sample`` event per row:
        ``prompt`` and ``output`` (text), optional ``prompt_id`` (default: the first 16 hex digits of the
        prompt's SHA-256), ``reference``, ``scores`` (name -> number), ``settings`` (a JSON object)."""
        if not self._disabled:
            self._outputs.samples(rows, step, key)

    def log_eval(self, results: Mapping[str, Any], step: int | None = None, *, suite: str = "eval",
                 checkpoint: int | str | None = None, config: Any = None, versions: Any = None,
                 n: int | None = None) -> None:
        """Record scores of ``suite``: ``results`` maps task -> {metric -> number} (or ``"task/metric"`` ->
        number), one ``eval`` event per task; ``checkpoint`` (a step, or ``"step:N"``) ties them to it."""
        if not self._disabled:
            self._outputs.evals(results, step, suite, checkpoint, config, versions, n)

    def log_media(self, key: str, media: Media, step: int | None = None) -> None:
        """Record one ``runcast.Image``, ``Table`` or ``Histogram`` under ``key`` at ``step`` (default: the
        run's current step); ``log`` takes them among metrics too."""
        if not self._disabled:
            self._outputs.log_media(key, media, step)

    def _hold(self, metrics: Mapping[str, Any], step: int | None, commit: bool | None) -> None:
        """``log`` with values held by ``commit=False`` (``pending.py``), or to hold."""
        now = self._pending.take(metrics, step, commit)
        pending, self._pending = self._pending, Pending()  # what stays held waits out these calls
        try:
            for values, at in now:
                self.log(values, at)
        finally:
            self._pending = pending

    def _seen(self) -> Iterable[str]:
        return self._steps.keys

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
        self._checkpoints.record(path, step, metrics, public, status, sha256, live=self._live)

    def data_mix(self, weights: Mapping[str, Any], step: int) -> None:
        """Record that from ``step`` on, data is drawn with ``weights`` (source -> weight >= 0)."""
        body = {"step": checked_step(step), "weights": wire_numbers(weights, "weights")}
        self._check("data_mix", body)
        self._put("data_mix", time.time(), None, body)

    def manifest(self, manifest: Mapping[str, Any], version: str, step: int | None = None) -> None:
        """Record a dataset manifest (a JSON object, <= 1 MiB) under ``version``."""
        body = {
            "step": checked_step(step, optional=True),
            "version": version,
            "manifest": json_object(manifest, "manifest"),
        }
        self._check("manifest", body)
        self._put("manifest", time.time(), None, body)

    def note(self, text: str, step: int | None = None) -> None:
        """Add an operator note to the run's timeline."""
        body = {"step": checked_step(step, optional=True), "text": text}
        self._check("note", body)
        self._put("note", time.time(), None, body)

    def set_policy(self, policy: Mapping[str, Any] | None = None, /, *, timeout: float = 10.0,
                   **settings: Any) -> dict[str, Any] | None:
        """Change what the public sees of this run, now (``runcast.wire.policy``; e.g.
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
        answer = put_policy(self._api[0], self._api[1], f"/runs/{self.id}/policy", change, timeout)
        in_force: dict[str, Any] = answer["policy"]
        return in_force

    def flush(self, timeout: float | None = 10.0) -> bool:
        """Wait until everything logged so far was sent or spooled; True if nothing is left unsent.

        Checkpoints handed to the uploader count: a trainer that flushes and then dies has
        published the checkpoints it reported before; so do images and histograms.
        """
        if self._sender is None or self._closed:
            return not self._outbox.queue
        if self._outputs.worker is not None:
            timeout = self._outputs.worker.wait(timeout)
        checkpoints = self._checkpoints
        timeout = checkpoints.wait_for_uploads(timeout)
        if checkpoints.prunes:  # pruned reports wait for the uploads before them
            checkpoints.release_prunes()
            if checkpoints.prunes:
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
        if self._pending.metrics:  # log(commit=False) values not committed yet
            try:
                self.log(*self._pending.drain())
            except (TypeError, ValueError) as exc:
                log.warning("runcast: the values logged with commit=False are left out: %s", exc)
        if self._checkpoints.uploader is not None and self._live:  # checkpoints first: the run ends after them
            self._checkpoints.close(self._finish_timeout if timeout is None else timeout)
        if self._outputs.worker is not None and self._live:  # and the media (what is left goes to the spool)
            self._outputs.worker.close(self._finish_timeout if timeout is None else timeout)
        self._closed = True
        self._live = False
        lifecycle.unregister(self)
        if self._system is not None:
            self._system.stop()
        if self._sender is None:
            return
        step = self._steps.step if self._steps.step >= 0 else None
        self._put("finished", time.time(), None, {"step": step, "status": status, "lost": self._outbox.lost() or None},
                  final=True)
        wait = self._finish_timeout if timeout is None else timeout
        delivered = self._sender.close(wait)
        if self._blobs is not None:
            self._blobs.close()
        if delivered:
            return
        where = self._sender.unsent_dir
        if where is not None:
            announce_unsent(self.id, self.segment, where, self._sender.unsent_events, wait,
                            offline=self._sender.offline, api=self._api)

    def _known_project(self) -> str | None:
        """The run's project; when ``init`` could not learn it, asked of the server now (None: still away)."""
        if self.project is None and self._api is not None:
            who = whoami(self._api[0], self._api[1], None, REPORT_TIMEOUT, warn_unreachable=False)
            self.project = who.project if who is not None else None
        return self.project

    @property
    def stats(self) -> RunStats:
        """A snapshot of the event counts."""
        outbox = self._outbox
        c = outbox.counters
        media = self._outputs.stats()
        return RunStats(c.logged + media.queued, c.sent, c.spooled, outbox.lost(), c.replayed, len(outbox.queue),
                        c.spilled, self._steps.ignored, self._checkpoints.stats(), media)

    @property
    def finished(self) -> bool:
        """True once ``finish()`` was called (also at exit)."""
        return self._closed

    @property
    def step(self) -> int:
        """The highest step logged so far (-1 before the first)."""
        return self._steps.step

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
        self._outbox.put(kind, ts, step, body, final=final)

    def _check(self, kind: str, body: Mapping[str, Any]) -> None:
        events.validate_event(
            {"type": kind, "run": self.id, "segment": self.segment, "seq": 0, "ts": time.time(), **body}
        )

    def _ack_command(self, command: str, step: int | None, outcome: str, message: str) -> None:
        body = {"command": command, "step": step, "outcome": outcome, "message": message[:MAX_COMMAND_MESSAGE_CHARS]}
        self._put("command_ack", time.time(), None, body)

    def _heartbeat(self) -> Item:
        step = self._steps.step
        body: dict[str, Any] = {"step": step if step >= 0 else None}
        lost = self._outbox.lost()
        if lost:
            body["lost"] = lost
        return (next(self._outbox.seq), "heartbeat", time.time(), None, body)
