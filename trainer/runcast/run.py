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
import time
from collections import deque
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType
from typing import Any

from . import events, lifecycle, runtime
from .events import MAX_METRICS_PER_EVENT, MAX_STEP, EventError, check_key, new_id
from .overflow import FORMAT as OVERFLOW_FORMAT
from .overflow import Overflow
from .sender import Counters, Item, Sender, SenderConfig, Wakeup
from .spool import Spool, SpoolBusy, default_dir
from .transport import Transport, make_transport, public_url
from .values import Deferred, coerce, int_to_float, json_object, read_deferred

log = logging.getLogger("runcast")

__all__ = ["Run", "RunStats", "init"]


@dataclass(frozen=True)
class RunStats:
    """Event counts of a run (every event type, including run_started, heartbeats, finished).

    ``logged``: accepted by the run. ``sent``: acknowledged by the service (``replayed``
    of them from the spool). ``spooled``: written to the spool. ``spilled``: written to
    the overflow file by ``log()`` because the queue was full or behind (they are sent
    from there in order). ``dropped``: lost, because the service rejected them or the
    disk could not take them (each cause is logged once); the run reports the count to
    the service, and its page shows the hole. ``queued``: waiting in memory right now.
    """

    logged: int
    sent: int
    spooled: int
    dropped: int
    replayed: int
    queued: int
    spilled: int = 0

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
    ) -> None:
        self.id = run_id
        self.checkpoint_dir = checkpoint_dir
        self.segment = new_id()
        self.url = url
        self.rank = rank
        self.enabled = enabled
        self.project: str = started["project"]
        self.name: str = started["name"]
        self._finish_timeout = finish_timeout
        self._batch_size = batch_size
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
        self._sender = Sender(
            config, self._queue, self._wake, transport, self._counters, self._heartbeat, self._overflow, self._lost,
            spool,
        )
        self._sender.start()
        lifecycle.register(self)

    # --- verbs ---------------------------------------------------------------------------

    def log(self, metrics: Mapping[str, Any], step: int | None = None) -> None:
        """Record ``metrics`` (name -> number or one-element tensor) at ``step``.

        ``step`` defaults to the highest step logged so far plus one (the first is 0,
        or ``resume_step`` for a resumed run). Each (name, step) is written once per
        segment: a name logged again at the same or an earlier step raises ValueError.
        NaN and +-Inf are recorded as such. Never blocks and never raises for a
        service problem.
        """
        if step is None:
            step = self._step + 1
        elif type(step) is not int or step < 0 or step > MAX_STEP:
            step = _check_step(step)
        if type(metrics) is not dict and not isinstance(metrics, Mapping):
            raise TypeError(f"metrics must be a dict of name -> number, got {type(metrics).__name__}")
        key_steps = self._key_steps
        keys = self._keys
        values: dict[str, float | Deferred] = {}
        for key, value in metrics.items():
            if key not in keys:
                self._new_key(key)
            last = key_steps.get(key)
            if last is not None and step <= last:
                raise ValueError(
                    f"metric {key!r} was already logged at step {last}; step {step} must be greater "
                    "(each metric is written once per step)"
                )
            kind = type(value)
            if kind is float:
                values[key] = value
            elif kind is int:
                values[key] = int_to_float(key, value)
            else:
                values[key] = coerce(key, value)
        if not values or len(values) > MAX_METRICS_PER_EVENT:
            raise ValueError(f"log() takes 1 to {MAX_METRICS_PER_EVENT} metrics, got {len(values)}")
        key_steps.update(dict.fromkeys(values, step))
        if step > self._step:
            self._step = step
        self._put("metrics", time.time(), step, values)

    def checkpoint(
        self,
        path: str | os.PathLike[str],
        step: int,
        metrics: Mapping[str, Any] | None = None,
        public: bool = True,
        status: str = "available",
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
            "sha256": None,
            "metrics": self._numbers(metrics or {}, "metrics"),
            "public": public,
            "status": status,
        }
        self._check("checkpoint", body)
        if copy_to is not None:
            self._check("checkpoint", {**body, "path": copy_to})
            if status == "pruned":
                body["path"] = copy_to  # the copy is what the server knows
                body["_delete"] = copy_to
            else:
                body["_copy_to"] = copy_to
                body["_copy_dir"] = is_dir
        if self._live and not is_dir and status == "available":
            body["_hash"] = True
        self._put("checkpoint", time.time(), None, body)

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

    def flush(self, timeout: float | None = 10.0) -> bool:
        """Wait until everything logged so far was sent or spooled; True if nothing is left unsent."""
        if self._sender is None or self._closed:
            return not self._queue
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
        self._closed = True
        self._live = False
        lifecycle.unregister(self)
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
        return RunStats(c.logged, c.sent, c.spooled, self._lost(), c.replayed, len(self._queue), c.spilled)

    @property
    def step(self) -> int:
        """The highest step logged so far (-1 before the first)."""
        return self._step

    def __enter__(self) -> Run:
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
        if len(queue) >= self._batch_size and not self._wake.pending:
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


def init(
    project: str,
    name: str,
    config: Any = None,
    *,
    server: str | None = None,
    transport: str | Transport | None = None,
    token: str | None = None,
    resume: str | None = None,
    resume_step: int | None = None,
    visibility: str = "public",
    seed: int | None = None,
    spool_dir: str | os.PathLike[str] | None = None,
    flush_interval: float = 1.0,
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
) -> Run:
    """Start broadcasting a run (or, with ``resume=RUN_ID``, a new segment of one). See docs/sdk.md.

    ``public_paths``: show this run's filesystem paths (checkpoint paths, path-like config
    values), host name, user and process id to every reader. By default only readers
    with a token of the run's project see them; everyone else sees file names and
    ``[withheld]``.

    ``checkpoint_dir`` (or ``RUNCAST_CHECKPOINT_DIR``): the storage directory the server
    serves checkpoints from, as this machine sees it; checkpoints saved elsewhere are
    copied into it off the training thread (``Run.checkpoint``, docs/artifacts.md).
    """
    server = server or os.environ.get("RUNCAST_SERVER") or None
    if checkpoint_dir is None:
        checkpoint_dir = os.environ.get("RUNCAST_CHECKPOINT_DIR") or None
    token = token or os.environ.get("RUNCAST_TOKEN") or None
    if rank is None:
        rank = _env_rank()
    enabled = rank == 0 or all_ranks
    _check_positive(flush_interval=flush_interval, heartbeat_interval=heartbeat_interval,
                    retry_initial=retry_initial, retry_max=retry_max)
    if finish_timeout < 0:
        raise ValueError("finish_timeout must not be negative")
    for label, number in (("batch_size", batch_size), ("max_queue", max_queue)):
        if isinstance(number, bool) or not isinstance(number, int) or number < 1:
            raise ValueError(f"{label} must be a positive integer")
    if resume is not None and (not isinstance(resume, str) or not events.ID_RE.match(resume)):
        raise ValueError("resume must be a run id (8-64 characters of A-Z, a-z, 0-9, '_' or '-')")
    run_id = resume or new_id()
    if seed is not None and not isinstance(seed, bool) and hasattr(seed, "__index__"):
        seed = operator.index(seed)  # numpy integers
    started: dict[str, Any] = {
        "project": project,
        "name": name,
        "config": json_object(config, "config"),
        "code": {},
        "env": {},
        "seed": seed,
        "resume_step": _check_step(resume_step, optional=True, field="resume_step"),
        "visibility": visibility,
    }
    if alerts is not None:  # per-run detector overrides (docs/alerts.md)
        started["alerts"] = json_object(alerts, "alerts")
    if not isinstance(public_paths, bool):
        raise ValueError("public_paths must be True or False")
    if public_paths:
        started["public_paths"] = True
    events.validate_event({"type": "run_started", "run": run_id, "segment": run_id, "seq": 0, "ts": 0, **started})
    sink: Transport | None = None
    if enabled:
        if isinstance(transport, str):
            sink = make_transport(transport, token)
        elif transport is not None:
            sink = transport
        elif server:
            sink = make_transport(server, token)
        if sink is not None and not token:
            log.warning("runcast: no token given (token= or RUNCAST_TOKEN); the service will likely refuse")
        started["env"] = runtime.storable(runtime.environment(rank))
        started["code"] = runtime.storable(runtime.code_revision()) if capture_code else {}
    base = next((u for u in (server, transport) if isinstance(u, str) and u.startswith("http")), None)
    return Run(
        run_id=run_id,
        started=started,
        url=f"{public_url(base.rstrip('/'))}/runs/{run_id}" if base else None,
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
    )


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
