"""System metrics of every rank: CPU, memory, GPUs, disk and network, sampled on a thread.

Each rank (rank 0 and the others alike, even where only rank 0 sends training metrics)
samples every ``interval`` seconds and sends the samples itself, over its own HTTP
client, as ``metrics`` events of the run's segment under
``system/<node>/rank<r>/<name>``. The step of a sample is its wall-clock second (epoch
seconds), so the ranks' series line up; the server keeps such system-only events out of
the run's step, last values and heartbeat (``events.is_system_event``).

``<node>`` is the host name only when the run opted in with ``public_paths=True`` (key
names are public, and a host name is withheld from readers otherwise); else a stable,
non-identifying label ``node<N>`` with N the node's rank (``GROUP_RANK`` / ``NODE_RANK``
as torchrun and Lightning set it, else ``RANK // LOCAL_WORLD_SIZE``, else 0).

The other ranks find the run through the launch: ``TORCHELASTIC_RUN_ID`` (torchrun
``--standalone`` or ``--rdzv-id``) or ``RUNCAST_LAUNCH_ID``, unique per launch, from which
every rank derives the same run id and segment (``launch_identity``). Without one, only
rank 0 samples.

psutil (and nvidia-ml-py for NVIDIA GPUs) are imported when the sampler starts; without
psutil the sampler is off (one log line), without a GPU or its driver there are no GPU
series and no error. Sampling never touches the training thread; a sample that cannot be
sent is kept (a few hundred at most) and retried, never spooled.
"""

from __future__ import annotations

import base64
import hashlib
import importlib
import itertools
import logging
import os
import socket
import threading
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from types import ModuleType
from typing import Any, Final

from .sender.transport import Rejected, Retryable, Transport
from .wire import events

log = logging.getLogger("runcast")

DEFAULT_INTERVAL: Final = 10.0
MIN_INTERVAL: Final = 1.0  # a sample's step is its second: two per second would collide
INTERVAL_ENV: Final = "RUNCAST_SYSTEM_INTERVAL"
LAUNCH_ENV: Final = "RUNCAST_LAUNCH_ID"
MAX_PENDING: Final = 360  # samples kept while the server is unreachable (an hour at 10 s)
SEQ_BASE: Final = 2**52  # system events' seq: SEQ_BASE + rank * 2**32 + n, apart from the SDK's own
MB: Final = 1024.0 * 1024.0


def interval_from(option: float | bool | None) -> float | None:
    """Seconds between samples, or None for off: ``option``, else ``RUNCAST_SYSTEM_INTERVAL``, else 10.

    ``False`` or ``0`` (``off`` / ``0`` in the variable) turns sampling off.
    """
    if option is None:
        raw = os.environ.get(INTERVAL_ENV, "").strip().lower()
        if not raw:
            return DEFAULT_INTERVAL
        if raw in ("off", "false", "no", "0"):
            return None
        try:
            option = float(raw)
        except ValueError:
            raise ValueError(f"{INTERVAL_ENV} must be a number of seconds or 'off', got {raw!r}") from None
    if option is False or option == 0:
        return None
    if option is True:
        return DEFAULT_INTERVAL
    if not isinstance(option, (int, float)) or not option >= MIN_INTERVAL or option == float("inf"):
        raise ValueError(f"system_metrics must be False, or a number of seconds >= {MIN_INTERVAL:g}, got {option!r}")
    return float(option)


@dataclass(frozen=True)
class LaunchIdentity:
    """The run id and segment every rank of one launch derives alike."""

    run: str
    segment: str


# The how-many-th init() of this process each launch id is at: the ranks of a job call
# init() alike, so the n-th run of every rank is the same run, and a process that opens
# several runs in one launch gets distinct ones. Process-wide by nature, like the launch.
_inits: dict[str, itertools.count[int]] = {}
_inits_lock = threading.Lock()


def launch_identity(resume: str | None = None) -> LaunchIdentity | None:
    """From ``RUNCAST_LAUNCH_ID`` or torchrun's ``TORCHELASTIC_RUN_ID`` (and restart count); None without one.

    Each call is this process's next ``init()`` of the launch: the n-th call of every rank
    derives the same ids, and no two calls of one process derive the same.
    """
    launch = os.environ.get(LAUNCH_ENV) or os.environ.get("TORCHELASTIC_RUN_ID") or ""
    if launch in ("", "none"):
        return None
    restart = os.environ.get("TORCHELASTIC_RESTART_COUNT", "0")
    with _inits_lock:
        nth = str(next(_inits.setdefault(f"{launch}\x00{restart}", itertools.count())))
    run = resume or _derived_id("run", launch, restart, nth)  # a restart is a new run, as without a launch id
    return LaunchIdentity(run=run, segment=_derived_id("segment", launch, restart, nth, run))


def _derived_id(*parts: str) -> str:
    digest = hashlib.sha256("\x00".join(("runcast",) + parts).encode()).digest()
    return base64.urlsafe_b64encode(digest[:12]).decode()


def node_label(show_host: bool) -> str:
    """The host name when the run opted in to show it, else ``node<N>``."""
    if show_host:
        return socket.gethostname() or "node0"
    for name in ("GROUP_RANK", "NODE_RANK"):
        value = _int_env(name)
        if value is not None:
            return f"node{value}"
    rank, local = _int_env("RANK"), _int_env("LOCAL_WORLD_SIZE")
    if rank is not None and local:
        return f"node{rank // local}"
    return "node0"


def _int_env(name: str) -> int | None:
    try:
        return int(os.environ[name])
    except (KeyError, ValueError):
        return None


def _import(name: str) -> ModuleType | None:
    try:
        return importlib.import_module(name)
    except ImportError:
        return None


class Collector:
    """Reads one sample: name -> number. Host-wide figures only on the node's first local rank.

    ``psutil`` and ``nvml`` are the modules (nvml may be None: no GPU series). Disk and
    network figures are rates since the previous sample.
    """

    def __init__(self, psutil: ModuleType, nvml: ModuleType | None, *, host_wide: bool, local_rank: int | None) -> None:
        self._psutil = psutil
        self._process = psutil.Process()
        self._host_wide = host_wide
        self._process.cpu_percent(None)  # the first call only starts the measurement
        if host_wide:
            psutil.cpu_percent(None)
        self._last = time.monotonic()
        self._disk = self._counters(psutil.disk_io_counters)
        self._net = self._counters(psutil.net_io_counters)
        self._nvml = nvml
        self._gpus = self._gpu_handles(nvml, local_rank) if nvml is not None else []

    @staticmethod
    def _counters(read: Callable[[], Any]) -> Any:
        try:
            return read()
        except (OSError, RuntimeError):
            return None

    @staticmethod
    def _gpu_handles(nvml: ModuleType, local_rank: int | None) -> list[tuple[int, Any]]:
        """(index, handle) of this rank's GPU (``LOCAL_RANK``'s visible device), else of every GPU."""
        try:
            nvml.nvmlInit()
            count = nvml.nvmlDeviceGetCount()
        except Exception as exc:  # noqa: BLE001 - no driver, no device: NVMLError and its many subclasses
            log.debug("runcast: no NVIDIA GPU metrics: %s", exc)
            return []
        indexes = list(range(count))
        if local_rank is not None:
            visible = os.environ.get("CUDA_VISIBLE_DEVICES", "")
            ids = [int(v) for v in visible.split(",") if v.strip().isdigit()] if visible else indexes
            mine = ids[local_rank] if local_rank < len(ids) else None
            indexes = [mine] if mine is not None and mine < count else []
        handles = []
        for index in indexes:
            try:
                handles.append((index, nvml.nvmlDeviceGetHandleByIndex(index)))
            except Exception as exc:  # noqa: BLE001 - NVMLError: this GPU is left out
                log.debug("runcast: GPU %d skipped: %s", index, exc)
        return handles

    def sample(self) -> dict[str, float]:
        """One sample (names relative to the rank's prefix)."""
        ps, proc = self._psutil, self._process
        out: dict[str, float] = {}
        with proc.oneshot():
            out["cpu/process_percent"] = proc.cpu_percent(None)
            out["memory/process_rss_mb"] = proc.memory_info().rss / MB
        now = time.monotonic()
        elapsed = max(now - self._last, 1e-6)
        self._last = now
        if self._host_wide:
            out["cpu/system_percent"] = ps.cpu_percent(None)
            vm = ps.virtual_memory()
            out["memory/system_used_percent"] = vm.percent
            out["memory/system_available_mb"] = vm.available / MB
            disk = self._counters(ps.disk_io_counters)
            if disk is not None and self._disk is not None:
                out["disk/read_mb_s"] = max(0, disk.read_bytes - self._disk.read_bytes) / MB / elapsed
                out["disk/write_mb_s"] = max(0, disk.write_bytes - self._disk.write_bytes) / MB / elapsed
            self._disk = disk
            net = self._counters(ps.net_io_counters)
            if net is not None and self._net is not None:
                out["net/sent_mb_s"] = max(0, net.bytes_sent - self._net.bytes_sent) / MB / elapsed
                out["net/recv_mb_s"] = max(0, net.bytes_recv - self._net.bytes_recv) / MB / elapsed
            self._net = net
        for index, handle in self._gpus:
            out.update(self._gpu(index, handle))
        return out

    def _gpu(self, index: int, handle: Any) -> dict[str, float]:
        nvml, out, name = self._nvml, {}, f"gpu{index}"
        assert nvml is not None
        readers: tuple[tuple[str, Callable[[], float]], ...] = (
            ("util_percent", lambda: nvml.nvmlDeviceGetUtilizationRates(handle).gpu),
            ("memory_used_mb", lambda: nvml.nvmlDeviceGetMemoryInfo(handle).used / MB),
            ("memory_percent", lambda: _percent(nvml.nvmlDeviceGetMemoryInfo(handle))),
            ("power_w", lambda: nvml.nvmlDeviceGetPowerUsage(handle) / 1000.0),
            ("temperature_c", lambda: nvml.nvmlDeviceGetTemperature(handle, nvml.NVML_TEMPERATURE_GPU)),
        )
        for label, read in readers:
            try:
                out[f"{name}/{label}"] = float(read())
            except Exception as exc:  # noqa: BLE001 - a figure this GPU does not report (NotSupported, ...)
                log.debug("runcast: %s/%s not read: %s", name, label, exc)
        return out

    def close(self) -> None:
        if self._gpus and self._nvml is not None:
            try:
                self._nvml.nvmlShutdown()
            except Exception as exc:  # noqa: BLE001 - at the end, nothing to do about it
                log.debug("runcast: nvmlShutdown: %s", exc)


def _percent(memory: Any) -> float:
    return 100.0 * memory.used / memory.total if memory.total else 0.0


def make_collector(local_rank: int | None) -> Collector | None:
    """A collector for this process, or None (one log line) when psutil is not installed."""
    psutil = _import("psutil")
    if psutil is None:
        log.info("runcast: no system metrics: psutil is not installed (pip install 'runcast[system]')")
        return None
    host_wide = local_rank is None or local_rank == 0
    return Collector(psutil, _import("pynvml"), host_wide=host_wide, local_rank=local_rank)


class SystemSampler:
    """The sampling thread of one rank: samples, keeps what is unsent, sends it."""

    def __init__(
        self,
        *,
        run: str,
        segment: str,
        rank: int,
        prefix: str,
        interval: float,
        collector: Collector,
        transport: Transport,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.run, self.segment, self.rank = run, segment, rank
        self.prefix = prefix.rstrip("/") + "/"
        self.interval = interval
        self.sent = 0  # samples the server acknowledged
        self.dropped = 0  # samples given up (kept too long, or refused)
        self._collector = collector
        self._transport = transport
        self._clock = clock
        self._pending: deque[dict[str, Any]] = deque()
        self._count = 0
        self._last_step = -1
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._main, name=f"runcast-system-rank{rank}", daemon=True)
        self._warned = False

    def start(self) -> None:
        self._thread.start()

    def stop(self, timeout: float = 2.0) -> None:
        """Stop sampling and send what is pending within ``timeout`` seconds."""
        if not self._thread.is_alive():
            return
        self._stop.set()
        self._thread.join(timeout)

    def sample_once(self) -> dict[str, Any]:
        """Take one sample and queue its event (the thread's step; also used by the benchmark)."""
        ts = self._clock()
        values = {self.prefix + name: value for name, value in self._collector.sample().items()}
        step = max(int(ts), self._last_step + 1)
        self._last_step = step
        event = {
            "v": events.SCHEMA_VERSION,
            "type": "metrics",
            "run": self.run,
            "segment": self.segment,
            "seq": SEQ_BASE + self.rank * 2**32 + self._count,
            "ts": ts,
            "step": step,
            "values": {k: events.encode_value(float(v)) for k, v in values.items()},
        }
        self._count += 1
        self._pending.append(event)
        while len(self._pending) > MAX_PENDING:
            self._pending.popleft()
            self.dropped += 1
        return event

    def _main(self) -> None:
        try:
            while not self._stop.wait(self.interval):
                try:
                    self.sample_once()
                except Exception as exc:  # noqa: BLE001 - psutil.Error, ...: a missed sample, never a stop
                    log.debug("runcast: system sample failed: %s", exc)
                self._send(self.interval)
            self._send(2.0)
        finally:
            self._collector.close()
            self._transport.close()

    def _send(self, timeout: float) -> None:
        while self._pending:
            batch = list(self._pending)[: events.COMPATIBLE_BATCH_EVENTS]
            try:
                self._transport.send(events.dumps_batch(batch), batch, timeout)
            except Retryable:
                return  # the next round tries again
            except Rejected as exc:
                if exc.status == 404:
                    return  # rank 0 has not started the run yet (or the server has not stored it)
                self._warn(f"the service refused system metrics ({exc}); this rank stops sending them")
                self.dropped += len(self._pending)
                self._pending.clear()
                self._stop.set()
                return
            for _ in batch:
                self._pending.popleft()
            self.sent += len(batch)

    def _warn(self, message: str) -> None:
        if not self._warned:
            self._warned = True
            log.warning("runcast: rank %d: %s", self.rank, message)


def start(
    interval: float | None,
    *,
    run: str,
    segment: str,
    rank: int,
    show_host: bool,
    url: str | None,
    token: str | None,
) -> SystemSampler | None:
    """Start this rank's sampler (None when off, without a server URL, or without psutil)."""
    if interval is None or url is None:
        return None
    collector = make_collector(_int_env("LOCAL_RANK"))
    if collector is None:
        return None
    from .sender.transport import make_transport

    sampler = SystemSampler(
        run=run,
        segment=segment,
        rank=rank,
        prefix=f"{events.SYSTEM_PREFIX}{node_label(show_host)}/rank{rank}",
        interval=interval,
        collector=collector,
        transport=make_transport(url, token),
    )
    sampler.start()
    return sampler

