"""Watchdog while serving: the server's CPU use (psutil) and, when NVML is available, GPU
utilisation, clocks, power, temperature and other processes on the GPU.

GPU near 0 % while a CPU core is busy during generation means the work runs on the CPU (field
notes §2: FastLLM INT4 with --tp 2). Samples are plain records; ``findings`` is a pure function.
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass
from typing import Callable

import psutil


@dataclass(frozen=True)
class GpuSample:
    index: int
    util_pct: float | None
    sm_clock_mhz: float | None
    max_sm_clock_mhz: float | None
    power_w: float | None
    power_limit_w: float | None
    temp_c: float | None
    throttle: tuple[str, ...]            # active clock-throttle reasons
    foreign_pids: tuple[int, ...]        # processes on this GPU that are not the server's


@dataclass(frozen=True)
class Sample:
    t: float
    cpu_cores: float | None              # server process tree CPU use, in cores (1.0 = one busy core)
    gpus: tuple[GpuSample, ...]          # empty when NVML is unavailable


@dataclass(frozen=True)
class WatchFinding:
    kind: str                            # cpu_fallback | power_clock | thermal | other_processes | no_gpu_telemetry
    text: str
    evidence: str


_THROTTLE = {  # NVML clocks-event reason bits
    0x4: "sw_power_cap", 0x8: "hw_slowdown", 0x20: "sw_thermal", 0x40: "hw_thermal", 0x80: "hw_power_brake",
}


def _nvml():
    try:
        import pynvml
        pynvml.nvmlInit()
        return pynvml
    except Exception:  # noqa: BLE001 - no driver / no library: telemetry is simply absent
        return None


def gpu_samples(nvml, own_pids: set[int]) -> tuple[GpuSample, ...]:
    if nvml is None:
        return ()
    out = []
    try:
        count = nvml.nvmlDeviceGetCount()
    except Exception:  # noqa: BLE001
        return ()
    for i in range(count):
        h = nvml.nvmlDeviceGetHandleByIndex(i)

        def get(fn, *a, scale=1.0, h=h):
            try:
                return fn(h, *a) / scale
            except Exception:  # noqa: BLE001
                return None
        try:
            util = float(nvml.nvmlDeviceGetUtilizationRates(h).gpu)
        except Exception:  # noqa: BLE001
            util = None
        try:
            bits = nvml.nvmlDeviceGetCurrentClocksThrottleReasons(h)
            throttle = tuple(name for bit, name in _THROTTLE.items() if bits & bit)
        except Exception:  # noqa: BLE001
            throttle = ()
        try:
            pids = tuple(p.pid for p in nvml.nvmlDeviceGetComputeRunningProcesses(h) if p.pid not in own_pids)
        except Exception:  # noqa: BLE001
            pids = ()
        out.append(GpuSample(i, util, get(nvml.nvmlDeviceGetClockInfo, 1), get(nvml.nvmlDeviceGetMaxClockInfo, 1),
                             get(nvml.nvmlDeviceGetPowerUsage, scale=1000.0),
                             get(nvml.nvmlDeviceGetEnforcedPowerLimit, scale=1000.0),
                             get(nvml.nvmlDeviceGetTemperature, 0), throttle, pids))
    return tuple(out)


class Watchdog:
    """Samples in a background thread; ``pids()`` returns the server's process tree pids."""

    def __init__(self, pids: Callable[[], list[int]], interval_s: float = 0.5, max_samples: int = 7200):
        self._pids = pids
        self.interval_s = interval_s
        self.max_samples = max_samples
        self.samples: list[Sample] = []
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._nvml = None
        self._since: tuple[float, float] | None = None      # (server CPU seconds, monotonic time) of the last sample

    def start(self) -> "Watchdog":
        self._nvml = _nvml()
        self._since = (self._cpu_seconds(self._pids()), time.monotonic())
        self._thread = threading.Thread(target=self._loop, name="watchdog", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> list[Sample]:
        self._stop.set()
        if self._thread:
            self._thread.join(timeout=5.0)
        if not self.samples and self._since is not None and not (self._thread and self._thread.is_alive()):
            self._sample()                 # a run shorter than one interval still gets its one sample
        return self.samples

    def _sample(self) -> None:
        pids = self._pids()
        cpu, now = self._cpu_seconds(pids), time.monotonic()
        assert self._since is not None             # start() took the first reading
        last_cpu, last_t = self._since
        cores = max(0.0, (cpu - last_cpu) / (now - last_t)) if now > last_t else None
        self._since = (cpu, now)
        self.samples.append(Sample(now, cores, gpu_samples(self._nvml, set(pids))))

    def _cpu_seconds(self, pids) -> float:
        total = 0.0
        for pid in pids:
            try:
                t = psutil.Process(pid).cpu_times()
                total += t.user + t.system
            except psutil.Error:
                continue
        return total

    def _loop(self) -> None:
        while not self._stop.wait(self.interval_s) and len(self.samples) < self.max_samples:
            self._sample()


def findings(samples: list[Sample], *, expect_gpu: bool = True) -> list[WatchFinding]:
    """What the samples say: CPU fallback, power/clock limits, thermal throttling, other GPU users."""
    out: list[WatchFinding] = []
    if not samples:
        return out
    cpu = [s.cpu_cores for s in samples if s.cpu_cores is not None]
    busy_cpu = sorted(cpu)[len(cpu) // 2] if cpu else 0.0
    with_gpu = [s for s in samples if s.gpus]
    if not with_gpu:
        if expect_gpu:
            out.append(WatchFinding("no_gpu_telemetry", "NVML is unavailable: GPU use, clocks and power were not "
                                    "measured", f"server CPU median {busy_cpu:.2f} cores"))
        return out
    utils = [max((g.util_pct or 0.0) for g in s.gpus) for s in with_gpu]
    gpu_med = sorted(utils)[len(utils) // 2]
    if gpu_med < 5.0 and busy_cpu >= 0.8:
        out.append(WatchFinding("cpu_fallback", "the GPU is idle while a CPU core is busy: the model runs on the CPU",
                                f"GPU utilisation median {gpu_med:.0f} %, server CPU median {busy_cpu:.2f} cores"))
    ratios = [g.sm_clock_mhz / g.max_sm_clock_mhz for s in with_gpu for g in s.gpus
              if g.sm_clock_mhz and g.max_sm_clock_mhz]
    power = {t for s in with_gpu for g in s.gpus for t in g.throttle if "power" in t}
    if power or (ratios and sorted(ratios)[len(ratios) // 2] < 0.75):
        r = f"median SM clock {sorted(ratios)[len(ratios) // 2]:.0%} of max" if ratios else "clock not read"
        out.append(WatchFinding("power_clock", "the GPU ran below its maximum clock (power limit or clock cap)",
                                f"{r}; throttle reasons: {', '.join(sorted(power)) or 'none reported'}"))
    thermal = {t for s in with_gpu for g in s.gpus for t in g.throttle if "thermal" in t or t == "hw_slowdown"}
    hot = max((g.temp_c or 0.0) for s in with_gpu for g in s.gpus)
    if thermal or hot >= 87:
        out.append(WatchFinding("thermal", "the GPU throttled for temperature",
                                f"max {hot:.0f} °C; reasons: {', '.join(sorted(thermal)) or 'temperature'}"))
    foreign = sorted({p for s in with_gpu for g in s.gpus for p in g.foreign_pids})
    if foreign:
        out.append(WatchFinding("other_processes", "other processes used the GPU during the run",
                                f"pids {', '.join(map(str, foreign[:8]))}"))
    return out


def listener_pids(port: int) -> list[int]:
    """Pids (and descendants) of the process listening on 127.0.0.1:port, when readable."""
    try:
        conns = psutil.net_connections(kind="inet")
    except psutil.Error:
        return []
    for c in conns:
        if c.status == psutil.CONN_LISTEN and c.laddr and c.laddr.port == port and c.pid:
            try:
                p = psutil.Process(c.pid)
                return [p.pid] + [ch.pid for ch in p.children(recursive=True)]
            except psutil.Error:
                return [c.pid]
    return []
