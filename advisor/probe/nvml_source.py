"""The one place that talks to NVML (nvidia-ml-py's ``pynvml``): raw answers as frozen records.

Every query goes through :class:`_Reader`, which turns an ``NVMLError`` (NotSupported on
consumer cards, NoPermission in containers, ...) into ``None`` plus an :class:`NvmlFailure`
naming the field, the NVML function and the error. Nothing here interprets the values; the
caller (advisor.probe.build) matches them to the GPU table and derives what it needs.

``read_snapshot(nvml)`` accepts any object with pynvml's function names, so tests pass a
replay of a recorded snapshot (advisor.probe.snapshot) instead of the real library.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, fields
from typing import Any, Callable

# NVML ABI constants (nvml.h); spelled out because pynvml's NVML_P2P_CAPS_INDEX_READ is a
# tuple by a stray comma (nvidia-ml-py 13.x) and a replayed module need not define them.
CLOCK_SM = 1
CLOCK_MEM = 2
P2P_CAPS_READ = 0
P2P_CAPS_NVLINK = 2
NVLINK_MAX_LINKS = 36   # NVML_NVLINK_MAX_LINKS in nvml.h 13.x; the walk stops at the first error
MIG_MAX_DEVICES_FALLBACK = 7

# Init errors that mean "no usable NVIDIA driver here" rather than a broken one.
_NO_DRIVER_ERRORS = ("NVMLError_LibraryNotFound", "NVMLError_DriverNotLoaded")
_NO_GPU_ERRORS = ("NVMLError_GpuNotFound", "NVMLError_NotFound")


@dataclass(frozen=True)
class NvmlFailure:
    """One NVML query that did not answer: shown as an explicit N/A, never a crash."""

    field: str        # our field name, e.g. "memory_bus_width"
    query: str        # the NVML function, e.g. "nvmlDeviceGetMemoryBusWidth"
    error: str        # error class, e.g. "NVMLError_NotSupported"
    message: str      # NVML's text, e.g. "Not Supported"


@dataclass(frozen=True)
class RawProcess:
    pid: int
    used_memory_bytes: int | None   # None: NVML could not attribute (WDDM, containers)
    name: str | None
    own: bool                       # this advisor process itself


@dataclass(frozen=True)
class RawNvLink:
    link: int
    active: bool
    remote_bus_id: str | None
    version: int | None


@dataclass(frozen=True)
class RawMigDevice:
    index: int
    uuid: str | None
    gpu_instance_id: int | None
    compute_instance_id: int | None
    sm_count: int | None
    memory_total_bytes: int | None
    failures: tuple[NvmlFailure, ...] = ()


@dataclass(frozen=True)
class RawDevice:
    index: int
    name: str | None
    uuid: str | None
    pci_bus_id: str | None
    pci_device_id: str | None          # "0x2204" (device half of NVML's pciDeviceId)
    pci_subsystem_id: str | None       # "0x147d1043"
    cc: tuple[int, int] | None
    memory_total_bytes: int | None
    memory_free_bytes: int | None
    memory_used_bytes: int | None
    memory_bus_width_bits: int | None
    max_mem_clock_mhz: int | None
    max_sm_clock_mhz: int | None
    max_customer_boost_mhz: int | None
    sm_count: int | None               # nvmlDeviceGetAttributes multiprocessorCount
    cuda_cores: int | None             # nvmlDeviceGetNumGpuCores
    power_limit_w: float | None        # current management limit
    default_power_limit_w: float | None
    enforced_power_limit_w: float | None
    pcie_max_gen: int | None
    pcie_max_width: int | None
    pcie_curr_gen: int | None
    pcie_curr_width: int | None
    nvlinks: tuple[RawNvLink, ...] | None   # None: NVLink not supported / not queryable
    mig_current: bool | None
    mig_pending: bool | None
    mig_devices: tuple[RawMigDevice, ...]
    util_gpu_pct: int | None
    util_mem_pct: int | None
    processes: tuple[RawProcess, ...] | None
    failures: tuple[NvmlFailure, ...] = ()


@dataclass(frozen=True)
class RawPair:
    a: int
    b: int
    common_ancestor: int | None      # NVML_TOPOLOGY_* level
    p2p_read: int | None             # NVML_P2P_STATUS_* (0 = OK)
    p2p_nvlink: int | None
    failures: tuple[NvmlFailure, ...] = ()


@dataclass(frozen=True)
class RawSnapshot:
    status: str                      # ok | no-driver | no-gpu | error
    message: str
    driver_version: str | None
    cuda_driver_version: int | None  # e.g. 12040
    nvml_version: str | None
    devices: tuple[RawDevice, ...]
    pairs: tuple[RawPair, ...]
    failures: tuple[NvmlFailure, ...] = ()


def load_pynvml():
    """Import nvidia-ml-py lazily (tests replace ``sys.modules['pynvml']`` with a replay)."""
    import pynvml

    return pynvml


class _Reader:
    def __init__(self, nvml: Any):
        self.nvml = nvml
        errors: list[type[BaseException]] = [nvml.NVMLError]
        mismatch = getattr(nvml, "NVMLLibraryMismatchError", None)
        if isinstance(mismatch, type) and issubclass(mismatch, BaseException):
            errors.append(mismatch)
        self.errors = tuple(errors)
        self.failures: list[NvmlFailure] = []

    def __call__(self, field: str, query: str, *args: Any) -> Any:
        try:
            return getattr(self.nvml, query)(*args)
        except self.errors as err:
            self.failures.append(_failure(field, query, err))
            return None

    def take(self) -> tuple[NvmlFailure, ...]:
        out, self.failures = tuple(self.failures), []
        return out


def _failure(field: str, query: str, err: BaseException) -> NvmlFailure:
    try:
        message = str(err)
    except Exception:  # pynvml's __str__ calls into the library, which may be gone
        message = type(err).__name__
    return NvmlFailure(field, query, type(err).__name__, message)


def _text(value: Any) -> str | None:
    if value is None:
        return None
    if isinstance(value, bytes):
        return value.decode(errors="replace")
    return str(value)


def _attr(obj: Any, name: str) -> Any:
    if obj is None:
        return None
    if isinstance(obj, dict):
        return obj.get(name)
    return getattr(obj, name, None)


def _watts(milliwatts: Any) -> float | None:
    return None if milliwatts is None else milliwatts / 1000.0


def default_process_name(pid: int) -> str | None:
    """Name of a process via psutil; None when it is gone or not ours to see."""
    try:
        import psutil

        return psutil.Process(pid).name()
    except Exception:  # NoSuchProcess, AccessDenied, ZombieProcess, psutil missing
        return None


def read_snapshot(
    nvml: Any = None,
    *,
    process_name: Callable[[int], str | None] | None = None,
    own_pid: int | None = None,
) -> RawSnapshot:
    """Query every GPU NVML sees. Never raises for NVML trouble: the status says what happened.

    ``process_name(pid)`` names the processes holding GPU memory (default: psutil).
    """
    process_name = process_name or default_process_name
    if nvml is None:
        if _no_nvml_library():     # no driver: pynvml's answer without its import (~10 ms of a cold plan)
            return _empty("no-driver", f"no NVIDIA driver found ({_LIBRARY_NOT_FOUND})")
        try:
            nvml = load_pynvml()
        except ImportError as err:
            return _empty("no-driver", f"nvidia-ml-py is not installed ({err})")
    own_pid = os.getpid() if own_pid is None else own_pid
    try:
        nvml.nvmlInit()
    except nvml.NVMLError as err:
        name = type(err).__name__
        msg = _failure("init", "nvmlInit", err).message
        if name in _NO_DRIVER_ERRORS:
            return _empty("no-driver", f"no NVIDIA driver found ({msg})")
        if name in _NO_GPU_ERRORS:
            return _empty("no-gpu", f"no NVIDIA GPU found ({msg})")
        return _empty("error", f"NVML could not start ({msg})")
    try:
        return _read_all(nvml, process_name, own_pid)
    finally:
        try:
            nvml.nvmlShutdown()
        except nvml.NVMLError:
            pass


# str() of pynvml's NVMLError_LibraryNotFound, which nvmlInit raises when its dlopen fails (nvidia-ml-py
# 13.x; tests/probe check it against the installed pynvml)
_LIBRARY_NOT_FOUND = "NVML Shared Library Not Found"


def _no_nvml_library() -> bool:
    """True when pynvml is installed, not imported yet, and would not find the NVML library: the dlopen
    its nvmlInit makes first (``libnvidia-ml.so.1``; Windows looks elsewhere and is left to pynvml)."""
    import sys

    if "pynvml" in sys.modules or sys.platform[:3] == "win":
        return False               # imported already (or a test's replay): ask it
    import importlib.util

    try:
        if importlib.util.find_spec("pynvml") is None:
            return False           # not installed: load_pynvml says so
    except (ImportError, ValueError):
        return False
    import ctypes

    try:
        ctypes.CDLL("libnvidia-ml.so.1")
    except OSError:
        return True
    return False


def _empty(status: str, message: str) -> RawSnapshot:
    return RawSnapshot(status, message, None, None, None, (), ())


def _read_all(nvml: Any, process_name: Callable[[int], str | None], own_pid: int) -> RawSnapshot:
    q = _Reader(nvml)
    driver = _text(q("driver_version", "nvmlSystemGetDriverVersion"))
    cuda = q("cuda_driver_version", "nvmlSystemGetCudaDriverVersion_v2")
    nvml_version = _text(q("nvml_version", "nvmlSystemGetNVMLVersion"))
    count = q("device_count", "nvmlDeviceGetCount")
    system_failures = q.take()
    if count is None:
        return RawSnapshot("error", "NVML answered but could not count GPUs", driver, cuda,
                           nvml_version, (), (), system_failures)
    if count == 0:
        return RawSnapshot("no-gpu", "the NVIDIA driver is loaded but reports no GPU", driver,
                           cuda, nvml_version, (), (), system_failures)
    handles: list = []
    devices = []
    for i in range(count):
        h = q("handle", "nvmlDeviceGetHandleByIndex", i)
        if h is None:  # a GPU that fell off the bus: report it, with everything N/A
            devices.append(_lost_device(i, q.take()))
            handles.append(None)
            continue
        handles.append(h)
        devices.append(_read_device(q, i, h, process_name, own_pid))
    pairs = []
    for a in range(count):
        for b in range(a + 1, count):
            if handles[a] is None or handles[b] is None:
                continue
            ancestor = q("common_ancestor", "nvmlDeviceGetTopologyCommonAncestor", handles[a], handles[b])
            p2p_read = q("p2p_read", "nvmlDeviceGetP2PStatus", handles[a], handles[b], P2P_CAPS_READ)
            p2p_nvlink = q("p2p_nvlink", "nvmlDeviceGetP2PStatus", handles[a], handles[b], P2P_CAPS_NVLINK)
            pairs.append(RawPair(a, b, ancestor, p2p_read, p2p_nvlink, q.take()))
    return RawSnapshot("ok", f"{count} NVIDIA GPU{'s' if count != 1 else ''} found", driver, cuda,
                       nvml_version, tuple(devices), tuple(pairs), system_failures)


def _lost_device(index: int, failures: tuple[NvmlFailure, ...]) -> RawDevice:
    blank: dict[str, Any] = {f.name: None for f in fields(RawDevice)}
    blank.update(index=index, mig_devices=(), failures=failures)
    return RawDevice(**blank)


def _read_device(q: _Reader, index: int, h: Any, process_name, own_pid: int) -> RawDevice:
    name = _text(q("name", "nvmlDeviceGetName", h))
    uuid = _text(q("uuid", "nvmlDeviceGetUUID", h))
    pci = q("pci", "nvmlDeviceGetPciInfo", h)
    bus_id = _text(_attr(pci, "busId"))
    raw_id = _attr(pci, "pciDeviceId")
    # pciDeviceId packs device (high 16 bits) and vendor (low 16 bits, 0x10de).
    devid = f"0x{(int(raw_id) >> 16) & 0xFFFF:04X}" if raw_id is not None else None
    raw_sub = _attr(pci, "pciSubSystemId")
    subsys = f"0x{int(raw_sub):08x}" if raw_sub is not None else None
    cc = q("cc", "nvmlDeviceGetCudaComputeCapability", h)
    mem = q("memory", "nvmlDeviceGetMemoryInfo", h)
    attrs = q("sm_count", "nvmlDeviceGetAttributes", h)
    links = _read_nvlinks(q, h)
    mig = q("mig_mode", "nvmlDeviceGetMigMode", h)
    mig_current = bool(mig[0]) if mig is not None else None
    util = q("utilization", "nvmlDeviceGetUtilizationRates", h)
    procs = q("processes", "nvmlDeviceGetComputeRunningProcesses", h)
    return RawDevice(
        index=index,
        name=name,
        uuid=uuid,
        pci_bus_id=bus_id,
        pci_device_id=devid,
        pci_subsystem_id=subsys,
        cc=(int(cc[0]), int(cc[1])) if cc is not None else None,   # NVML gives (major, minor)
        memory_total_bytes=_attr(mem, "total"),
        memory_free_bytes=_attr(mem, "free"),
        memory_used_bytes=_attr(mem, "used"),
        memory_bus_width_bits=q("memory_bus_width", "nvmlDeviceGetMemoryBusWidth", h),
        max_mem_clock_mhz=q("max_mem_clock", "nvmlDeviceGetMaxClockInfo", h, CLOCK_MEM),
        max_sm_clock_mhz=q("max_sm_clock", "nvmlDeviceGetMaxClockInfo", h, CLOCK_SM),
        max_customer_boost_mhz=q("max_customer_boost_clock", "nvmlDeviceGetMaxCustomerBoostClock", h, CLOCK_SM),
        sm_count=_attr(attrs, "multiprocessorCount"),
        cuda_cores=q("cuda_cores", "nvmlDeviceGetNumGpuCores", h),
        power_limit_w=_watts(q("power_limit", "nvmlDeviceGetPowerManagementLimit", h)),
        default_power_limit_w=_watts(q("default_power_limit", "nvmlDeviceGetPowerManagementDefaultLimit", h)),
        enforced_power_limit_w=_watts(q("enforced_power_limit", "nvmlDeviceGetEnforcedPowerLimit", h)),
        pcie_max_gen=q("pcie_max_gen", "nvmlDeviceGetMaxPcieLinkGeneration", h),
        pcie_max_width=q("pcie_max_width", "nvmlDeviceGetMaxPcieLinkWidth", h),
        pcie_curr_gen=q("pcie_curr_gen", "nvmlDeviceGetCurrPcieLinkGeneration", h),
        pcie_curr_width=q("pcie_curr_width", "nvmlDeviceGetCurrPcieLinkWidth", h),
        nvlinks=links,
        mig_current=mig_current,
        mig_pending=bool(mig[1]) if mig is not None else None,
        mig_devices=_read_mig_devices(q, h) if mig_current else (),
        util_gpu_pct=_attr(util, "gpu"),
        util_mem_pct=_attr(util, "memory"),
        processes=None if procs is None else tuple(
            RawProcess(
                pid=int(_attr(p, "pid")),
                used_memory_bytes=_attr(p, "usedGpuMemory"),
                name=process_name(int(_attr(p, "pid"))),
                own=int(_attr(p, "pid")) == own_pid,
            )
            for p in procs
        ),
        failures=q.take(),
    )


def _read_nvlinks(q: _Reader, h: Any) -> tuple[RawNvLink, ...] | None:
    """Walk links 0..N until NVML says there are no more; None when link 0 is not queryable."""
    links = []
    for link in range(NVLINK_MAX_LINKS):
        probe = _Reader(q.nvml)
        state = probe("nvlink_state", "nvmlDeviceGetNvLinkState", h, link)
        if state is None:
            if link == 0:  # consumer cards without a bridge: NotSupported on link 0
                q.failures.extend(probe.take())
                return None
            break  # InvalidArgument / NotSupported past the last link: the normal end
        remote = None
        version = None
        if state:
            remote = _text(_attr(probe("nvlink_remote_pci", "nvmlDeviceGetNvLinkRemotePciInfo", h, link), "busId"))
            version = probe("nvlink_version", "nvmlDeviceGetNvLinkVersion", h, link)
            q.failures.extend(probe.take())
        links.append(RawNvLink(link, bool(state), remote, version))
    return tuple(links)


def _read_mig_devices(q: _Reader, h: Any) -> tuple[RawMigDevice, ...]:
    top = q("mig_max_devices", "nvmlDeviceGetMaxMigDeviceCount", h)
    out = []
    for i in range(top if top is not None else MIG_MAX_DEVICES_FALLBACK):
        probe = _Reader(q.nvml)
        mh = probe("mig_handle", "nvmlDeviceGetMigDeviceHandleByIndex", h, i)
        if mh is None:  # NotFound: slot not populated
            continue
        attrs = probe("mig_attributes", "nvmlDeviceGetAttributes", mh)
        mem = probe("mig_memory", "nvmlDeviceGetMemoryInfo", mh)
        out.append(RawMigDevice(
            index=i,
            uuid=_text(probe("mig_uuid", "nvmlDeviceGetUUID", mh)),
            gpu_instance_id=probe("mig_gpu_instance", "nvmlDeviceGetGpuInstanceId", mh),
            compute_instance_id=probe("mig_compute_instance", "nvmlDeviceGetComputeInstanceId", mh),
            sm_count=_attr(attrs, "multiprocessorCount"),
            memory_total_bytes=_attr(mem, "total"),
            failures=probe.take(),
        ))
    return tuple(out)
