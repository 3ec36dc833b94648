"""The system sampler (runcast.system): options, labels, the ranks' shared identity, the
collector with a fake NVML module (this machine has no GPU) and with the real one (no
driver here: no GPU series, no error), and the thread's sending rules."""

from __future__ import annotations

import socket
import types
from typing import Any

import pytest
from runcast.wire import events
from runcast import system
from runcast.sender.transport import Rejected, Retryable


def test_interval_from_option_and_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(system.INTERVAL_ENV, raising=False)
    assert system.interval_from(None) == system.DEFAULT_INTERVAL
    assert system.interval_from(False) is None and system.interval_from(0) is None
    assert system.interval_from(2.5) == 2.5
    for value, want in (("off", None), ("0", None), ("30", 30.0), ("", system.DEFAULT_INTERVAL)):
        monkeypatch.setenv(system.INTERVAL_ENV, value)
        assert system.interval_from(None) == want
    monkeypatch.setenv(system.INTERVAL_ENV, "often")
    with pytest.raises(ValueError, match="RUNCAST_SYSTEM_INTERVAL"):
        system.interval_from(None)
    for bad in (0.5, -1, float("nan"), float("inf"), "10"):
        with pytest.raises(ValueError, match="system_metrics"):
            system.interval_from(bad)  # type: ignore[arg-type]


def test_node_label_shows_the_host_only_when_the_run_opted_in(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("GROUP_RANK", "NODE_RANK", "RANK", "LOCAL_WORLD_SIZE"):
        monkeypatch.delenv(name, raising=False)
    assert system.node_label(False) == "node0"
    assert system.node_label(True) == socket.gethostname()
    monkeypatch.setenv("RANK", "5")
    monkeypatch.setenv("LOCAL_WORLD_SIZE", "2")
    assert system.node_label(False) == "node2"
    monkeypatch.setenv("GROUP_RANK", "3")
    assert system.node_label(False) == "node3"


def test_the_ranks_of_one_launch_derive_one_run_and_segment(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in (system.LAUNCH_ENV, "TORCHELASTIC_RUN_ID", "TORCHELASTIC_RESTART_COUNT"):
        monkeypatch.delenv(name, raising=False)
    assert system.launch_identity() is None
    monkeypatch.setenv("TORCHELASTIC_RUN_ID", "none")  # torchrun without a rendezvous id
    assert system.launch_identity() is None
    monkeypatch.setattr(system, "_inits", {})  # a fresh process (each rank is one)
    monkeypatch.setenv("TORCHELASTIC_RUN_ID", "0f8e7d6c")
    first = system.launch_identity()
    assert first is not None and events.ID_RE.match(first.run) and events.ID_RE.match(first.segment)
    second = system.launch_identity()  # a second init() in the same process: another run
    assert second is not None and second.run != first.run and second.segment != first.segment
    monkeypatch.setattr(system, "_inits", {})  # another rank of the same launch: the same two
    assert (system.launch_identity(), system.launch_identity()) == (first, second)
    monkeypatch.setattr(system, "_inits", {})
    monkeypatch.setenv("TORCHELASTIC_RESTART_COUNT", "1")  # torchrun restarted the workers
    again = system.launch_identity()
    assert again is not None and again.run != first.run and again.segment != first.segment
    resumed = system.launch_identity(resume="earlier-run-1")
    assert resumed is not None and resumed.run == "earlier-run-1"
    assert resumed.segment not in (first.segment, second.segment, again.segment)
    monkeypatch.setenv(system.LAUNCH_ENV, "slurm-42")
    assert system.launch_identity() not in (None, first, second, again)


class NVMLError(Exception):
    pass


def fake_nvml(count: int = 2, *, init_fails: bool = False, no_power: bool = False) -> types.ModuleType:
    """A module with the pynvml calls the collector makes; GPU i reports figures derived from i."""
    nvml = types.ModuleType("pynvml")
    nvml.NVML_TEMPERATURE_GPU = 0  # type: ignore[attr-defined]
    nvml.shutdowns = 0  # type: ignore[attr-defined]

    def init() -> None:
        if init_fails:
            raise NVMLError("Driver Not Loaded")

    def power(i: int) -> int:
        if no_power:
            raise NVMLError("Not Supported")
        return 250_000 + i * 1000

    def shutdown() -> None:
        nvml.shutdowns += 1  # type: ignore[attr-defined]

    nvml.nvmlInit = init  # type: ignore[attr-defined]
    nvml.nvmlShutdown = shutdown  # type: ignore[attr-defined]
    nvml.nvmlDeviceGetCount = lambda: count  # type: ignore[attr-defined]
    nvml.nvmlDeviceGetHandleByIndex = lambda i: i  # type: ignore[attr-defined]
    nvml.nvmlDeviceGetUtilizationRates = lambda i: types.SimpleNamespace(gpu=90 + i, memory=40)  # type: ignore[attr-defined]
    nvml.nvmlDeviceGetMemoryInfo = lambda i: types.SimpleNamespace(  # type: ignore[attr-defined]
        used=(i + 1) * 1024**3, total=80 * 1024**3, free=0
    )
    nvml.nvmlDeviceGetPowerUsage = power  # type: ignore[attr-defined]
    nvml.nvmlDeviceGetTemperature = lambda i, sensor: 60 + i  # type: ignore[attr-defined]
    return nvml


def test_collector_reads_this_ranks_gpu_through_nvml(monkeypatch: pytest.MonkeyPatch) -> None:
    import psutil

    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    nvml = fake_nvml()
    collector = system.Collector(psutil, nvml, host_wide=False, local_rank=1)
    sample = collector.sample()
    assert {k for k in sample if k.startswith("gpu")} == {
        "gpu1/util_percent", "gpu1/memory_used_mb", "gpu1/memory_percent", "gpu1/power_w", "gpu1/temperature_c",
    }  # fmt: skip
    assert sample["gpu1/util_percent"] == 91.0 and sample["gpu1/memory_used_mb"] == 2048.0
    assert sample["gpu1/memory_percent"] == 2.5 and sample["gpu1/power_w"] == 251.0
    assert sample["gpu1/temperature_c"] == 61.0
    # Not the first local rank: no host-wide figures (the node's rank 0 reports them once).
    assert set(sample) - {k for k in sample if k.startswith("gpu")} == {"cpu/process_percent", "memory/process_rss_mb"}
    collector.close()
    assert nvml.shutdowns == 1  # type: ignore[attr-defined]

    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "1,0")  # local rank 0 sees physical GPU 1
    one = system.Collector(psutil, fake_nvml(), host_wide=True, local_rank=0).sample()
    assert "gpu1/util_percent" in one and "gpu0/util_percent" not in one
    assert {"cpu/system_percent", "memory/system_used_percent", "disk/read_mb_s", "net/sent_mb_s"} <= set(one)

    every = system.Collector(psutil, fake_nvml(3, no_power=True), host_wide=True, local_rank=None).sample()
    assert {k.partition("/")[0] for k in every if k.startswith("gpu")} == {"gpu0", "gpu1", "gpu2"}
    assert not any(k.endswith("power_w") for k in every)  # a figure the GPU lacks is left out


def test_no_gpu_or_no_driver_gives_no_gpu_series_and_no_error() -> None:
    import psutil

    failing = system.Collector(psutil, fake_nvml(init_fails=True), host_wide=True, local_rank=0)
    assert not any(k.startswith("gpu") for k in failing.sample())
    none = system.Collector(psutil, fake_nvml(0), host_wide=True, local_rank=0)
    assert not any(k.startswith("gpu") for k in none.sample())
    real = system.make_collector(0)  # the real nvidia-ml-py; this machine has no NVIDIA driver
    assert real is not None
    assert not any(k.startswith("gpu") for k in real.sample())
    real.close()


class Recorder:
    """A transport that answers from a script of outcomes, then accepts."""

    url = "http://recorder"

    def __init__(self, *outcomes: Exception) -> None:
        self.outcomes = list(outcomes)
        self.batches: list[list[dict[str, Any]]] = []
        self.closed = False

    def send(self, body: bytes, batch: list[dict[str, Any]], timeout: float) -> None:
        events.validate_batch(__import__("json").loads(body))
        if self.outcomes:
            raise self.outcomes.pop(0)
        self.batches.append(batch)

    def close(self) -> None:
        self.closed = True


class FixedCollector:
    def __init__(self) -> None:
        self.closed = False

    def sample(self) -> dict[str, float]:
        return {"cpu/process_percent": 12.5, "gpu0/util_percent": float("nan")}

    def close(self) -> None:
        self.closed = True


def sampler(transport: Recorder, clock: list[float]) -> system.SystemSampler:
    return system.SystemSampler(
        run="run-abcdefgh", segment="seg-abcdefgh", rank=3, prefix="system/node1/rank3", interval=1.0,
        collector=FixedCollector(), transport=transport, clock=lambda: clock[0],  # type: ignore[arg-type]
    )  # fmt: skip


def test_samples_wait_for_the_run_and_the_service_then_arrive_once() -> None:
    transport = Recorder(Rejected("HTTP 404: unknown run", 404), Retryable("connection refused"))
    clock = [1_700_000_000.4]
    s = sampler(transport, clock)
    for _ in range(3):
        s.sample_once()
        s._send(1.0)
        clock[0] += 1.0
    assert len(transport.batches) == 1 and s.sent == 3 and s.dropped == 0
    sent = transport.batches[0]
    assert [e["step"] for e in sent] == [1_700_000_000, 1_700_000_001, 1_700_000_002]
    assert [e["seq"] for e in sent] == [system.SEQ_BASE + 3 * 2**32 + n for n in range(3)]
    assert sent[0]["values"] == {"system/node1/rank3/cpu/process_percent": 12.5, "system/node1/rank3/gpu0/util_percent": "NaN"}
    assert all(events.is_system_event(e) for e in sent)
    # Two samples within one second still get distinct steps.
    s.sample_once()
    assert s.sample_once()["step"] == s._last_step and s._last_step == 1_700_000_004


def test_a_refused_batch_stops_the_sampler_with_one_warning(caplog: pytest.LogCaptureFixture) -> None:
    transport = Recorder(Rejected("HTTP 401: bad token", 401))
    s = sampler(transport, [1_700_000_000.0])
    s.sample_once()
    s._send(1.0)
    assert s.dropped == 1 and s._stop.is_set()
    assert [r.getMessage() for r in caplog.records] == [
        "runcast: rank 3: the service refused system metrics (HTTP 401: bad token); this rank stops sending them"
    ]


def test_pending_samples_are_bounded() -> None:
    transport = Recorder()
    clock = [1_700_000_000.0]
    s = sampler(transport, clock)
    for _ in range(system.MAX_PENDING + 5):
        s.sample_once()
        clock[0] += 1
    assert len(s._pending) == system.MAX_PENDING and s.dropped == 5


def test_the_thread_stops_and_sends_what_is_pending() -> None:
    transport = Recorder()
    s = system.SystemSampler(
        run="run-abcdefgh", segment="seg-abcdefgh", rank=0, prefix="system/node0/rank0", interval=1.0,
        collector=FixedCollector(), transport=transport,  # type: ignore[arg-type]
    )  # fmt: skip
    s.start()
    s.sample_once()
    s.stop()
    assert s.sent == 1 and transport.closed and s._collector.closed  # type: ignore[attr-defined]


def test_is_system_event() -> None:
    base = {"type": "metrics", "step": 1}
    assert events.is_system_event({**base, "values": {"system/node0/rank0/cpu/process_percent": 1.0}})
    assert not events.is_system_event({**base, "values": {"system/node0/rank0/x": 1.0, "loss": 2.0}})
    assert not events.is_system_event({**base, "values": {}})
    assert not events.is_system_event({"type": "heartbeat", "step": 1})
