"""NVML snapshots: record what NVML answers on a real machine, replay it anywhere.

A snapshot is JSON keyed by NVML function name, per device, per device pair and per MIG slot:

    {"format": "nvfp4-advisor/nvml-snapshot/1",
     "init": null,                                  # or {"error": "DriverNotLoaded"}
     "system": {"nvmlSystemGetDriverVersion": "550.54.14", ...},
     "devices": [{"nvmlDeviceGetName": "NVIDIA GeForce RTX 3090",
                  "nvmlDeviceGetMemoryBusWidth": {"error": "NotSupported"},
                  "nvmlDeviceGetMaxClockInfo": {"by_arg": {"1": 2100, "2": 9751}},
                  "mig_devices": [...]}],
     "pairs": {"0,1": {"nvmlDeviceGetTopologyCommonAncestor": 10, ...}},
     "process_names": {"4242": "python3"}}

:class:`ReplayNvml` is a stand-in for the ``pynvml`` module: same function names, the real
``pynvml.NVMLError_*`` classes. Tests install it as ``sys.modules['pynvml']`` so the probe runs
its real code path. ``python -m advisor.probe.snapshot > my-gpu.json`` records this machine
through :class:`RecordingNvml`, which wraps the real module with the same interface.
"""

from __future__ import annotations

import json
import sys
from types import SimpleNamespace
from typing import Any

FORMAT = "nvfp4-advisor/nvml-snapshot/1"

# Functions whose trailing argument selects a sub-answer (clock type, link, index).
_BY_ARG = {
    "nvmlDeviceGetMaxClockInfo", "nvmlDeviceGetMaxCustomerBoostClock", "nvmlDeviceGetNvLinkState",
    "nvmlDeviceGetNvLinkRemotePciInfo", "nvmlDeviceGetNvLinkVersion", "nvmlDeviceGetP2PStatus",
}
# What NVML answers for an argument past the end (a link the GPU lacks, an empty MIG slot).
_PAST_END = {
    "nvmlDeviceGetNvLinkState": "InvalidArgument",
    "nvmlDeviceGetNvLinkRemotePciInfo": "InvalidArgument",
    "nvmlDeviceGetNvLinkVersion": "InvalidArgument",
}


class SnapshotGap(KeyError):
    """The probe asked something the snapshot does not hold: the snapshot is incomplete."""


class ReplayHandle:
    def __init__(self, device: int, mig: int | None = None):
        self.device, self.mig = device, mig

    def __repr__(self) -> str:
        return f"ReplayHandle({self.device}, {self.mig})"


def _value(v: Any) -> Any:
    """JSON -> the shape pynvml returns: structs as attribute objects, hex strings as ints."""
    if isinstance(v, dict):
        return SimpleNamespace(**{k: _value(x) for k, x in v.items()})
    if isinstance(v, list):
        return [_value(x) for x in v]
    if isinstance(v, str) and v.startswith("0x"):
        return int(v, 16)
    return v


class ReplayNvml:
    """A ``pynvml`` look-alike answering from a snapshot dict."""

    def __init__(self, snapshot: dict[str, Any]):
        import pynvml  # the real error classes, so `except pynvml.NVMLError` behaves as in production

        self._pynvml = getattr(pynvml, "_pynvml", pynvml)  # already replaced by another replay
        self.NVMLError = pynvml.NVMLError
        self.NVMLLibraryMismatchError = pynvml.NVMLLibraryMismatchError
        self.snap = snapshot
        self.calls: list[str] = []
        self._initialised = 0

    def __getattr__(self, name: str) -> Any:
        if name.startswith("NVMLError_"):
            return getattr(self._pynvml, name)
        raise AttributeError(name)

    # -- errors
    def _raise(self, spec: str) -> None:
        raise getattr(self._pynvml, f"NVMLError_{spec}")()

    def _answer(self, record: dict[str, Any] | None, fn: str, arg: Any = None) -> Any:
        self.calls.append(fn)
        if not self._initialised:
            self._raise("Uninitialized")
        if record is None or fn not in record:
            raise SnapshotGap(f"snapshot has no answer for {fn}")
        v = record[fn]
        if isinstance(v, dict) and set(v) == {"by_arg"}:
            key = str(arg)
            if key not in v["by_arg"]:
                if fn in _PAST_END:
                    self._raise(_PAST_END[fn])
                raise SnapshotGap(f"snapshot has no answer for {fn}({key})")
            v = v["by_arg"][key]
        if isinstance(v, dict) and set(v) == {"error"}:
            self._raise(v["error"])
        return _value(v)

    def _dev(self, h: ReplayHandle) -> dict[str, Any]:
        d = self.snap["devices"][h.device]
        if h.mig is None:
            return d
        return d["mig_devices"][h.mig]

    # -- library and system
    def nvmlInit(self):
        self.calls.append("nvmlInit")
        err = (self.snap.get("init") or {}).get("error")
        if err:
            self._raise(err)
        self._initialised += 1

    def nvmlShutdown(self):
        self.calls.append("nvmlShutdown")
        if not self._initialised:
            self._raise("Uninitialized")
        self._initialised -= 1

    def nvmlSystemGetDriverVersion(self):
        return self._answer(self.snap.get("system"), "nvmlSystemGetDriverVersion")

    def nvmlSystemGetCudaDriverVersion_v2(self):
        return self._answer(self.snap.get("system"), "nvmlSystemGetCudaDriverVersion_v2")

    def nvmlSystemGetNVMLVersion(self):
        return self._answer(self.snap.get("system"), "nvmlSystemGetNVMLVersion")

    def nvmlDeviceGetCount(self):
        self.calls.append("nvmlDeviceGetCount")
        if not self._initialised:
            self._raise("Uninitialized")
        if self.snap.get("count_error"):
            self._raise(self.snap["count_error"])
        return len(self.snap.get("devices", []))

    def nvmlDeviceGetHandleByIndex(self, i):
        self.calls.append("nvmlDeviceGetHandleByIndex")
        err = self.snap["devices"][i].get("handle_error")
        if err:
            self._raise(err)
        return ReplayHandle(i)

    # -- per device (also answered for MIG handles from their own record)
    def nvmlDeviceGetMigDeviceHandleByIndex(self, h, i):
        self.calls.append("nvmlDeviceGetMigDeviceHandleByIndex")
        slots = self.snap["devices"][h.device].get("mig_devices", [])
        if i >= len(slots) or slots[i] is None:
            self._raise("NotFound")
        return ReplayHandle(h.device, i)

    def nvmlDeviceGetTopologyCommonAncestor(self, a, b):
        return self._answer(self._pair(a, b), "nvmlDeviceGetTopologyCommonAncestor")

    def nvmlDeviceGetP2PStatus(self, a, b, index):
        return self._answer(self._pair(a, b), "nvmlDeviceGetP2PStatus", index)

    def _pair(self, a: ReplayHandle, b: ReplayHandle) -> dict[str, Any] | None:
        lo, hi = sorted((a.device, b.device))
        return self.snap.get("pairs", {}).get(f"{lo},{hi}")


_DEVICE_FUNCS = (
    "nvmlDeviceGetName", "nvmlDeviceGetUUID", "nvmlDeviceGetPciInfo",
    "nvmlDeviceGetCudaComputeCapability", "nvmlDeviceGetMemoryInfo", "nvmlDeviceGetAttributes",
    "nvmlDeviceGetMemoryBusWidth", "nvmlDeviceGetMaxClockInfo", "nvmlDeviceGetMaxCustomerBoostClock",
    "nvmlDeviceGetNumGpuCores", "nvmlDeviceGetPowerManagementLimit",
    "nvmlDeviceGetPowerManagementDefaultLimit", "nvmlDeviceGetEnforcedPowerLimit",
    "nvmlDeviceGetMaxPcieLinkGeneration", "nvmlDeviceGetMaxPcieLinkWidth",
    "nvmlDeviceGetCurrPcieLinkGeneration", "nvmlDeviceGetCurrPcieLinkWidth",
    "nvmlDeviceGetNvLinkState", "nvmlDeviceGetNvLinkRemotePciInfo", "nvmlDeviceGetNvLinkVersion",
    "nvmlDeviceGetMigMode", "nvmlDeviceGetMaxMigDeviceCount", "nvmlDeviceGetUtilizationRates",
    "nvmlDeviceGetComputeRunningProcesses", "nvmlDeviceGetGpuInstanceId",
    "nvmlDeviceGetComputeInstanceId",
)


def _make_device_func(fn: str):
    def call(self, h, *args):
        return self._answer(self._dev(h), fn, args[0] if args else None)

    call.__name__ = fn
    return call


for _fn in _DEVICE_FUNCS:
    setattr(ReplayNvml, _fn, _make_device_func(_fn))


def replay_process_name(snapshot: dict[str, Any]):
    names = snapshot.get("process_names", {})
    return lambda pid: names.get(str(pid))


# ------------------------------------------------------------------ recording a real machine
def _plain(v: Any) -> Any:
    """pynvml return values -> JSON (structs by their fields, bytes decoded, ids as hex)."""
    if isinstance(v, bytes):
        return v.decode(errors="replace")
    if isinstance(v, (list, tuple)):
        return [_plain(x) for x in v]
    fields = getattr(v, "_fields_", None)
    if fields is not None:
        out = {}
        for f in fields:
            x = getattr(v, f[0])
            out[f[0]] = f"0x{x:08x}" if f[0] in ("pciDeviceId", "pciSubSystemId") else _plain(x)
        return out
    if hasattr(v, "__dict__") and not isinstance(v, type):
        return {k: _plain(x) for k, x in vars(v).items() if not k.startswith("_")}
    return v


class _RecHandle:
    def __init__(self, real: Any, device: int, mig: int | None = None):
        self.real, self.device, self.mig = real, device, mig


class RecordingNvml:
    """Wraps the real ``pynvml`` and writes every answer into a snapshot dict."""

    def __init__(self, real: Any):
        self._real = real
        self.NVMLError = real.NVMLError
        self.NVMLLibraryMismatchError = real.NVMLLibraryMismatchError
        self.snap: dict[str, Any] = {"format": FORMAT, "init": None, "system": {}, "devices": [],
                                     "pairs": {}, "process_names": {}}

    def _store(self, record: dict[str, Any], fn: str, arg: Any, call):
        try:
            result = call()
            value = _plain(result)
        except self._real.NVMLError as err:
            value, result = {"error": type(err).__name__.replace("NVMLError_", "")}, err
        if fn in _BY_ARG:
            record.setdefault(fn, {"by_arg": {}})["by_arg"][str(arg)] = value
        else:
            record[fn] = value
        if isinstance(result, BaseException):
            raise result
        return result

    def _rec(self, h: _RecHandle) -> dict[str, Any]:
        d = self.snap["devices"][h.device]
        return d if h.mig is None else d["mig_devices"][h.mig]

    def __getattr__(self, fn: str) -> Any:
        real = getattr(self._real, fn)
        if fn in _DEVICE_FUNCS:
            def device_call(h, *args):
                return self._store(self._rec(h), fn, args[0] if args else None,
                                   lambda: real(h.real, *args))
            return device_call
        if fn.startswith("nvmlSystemGet"):
            return lambda: self._store(self.snap["system"], fn, None, real)
        return real

    def nvmlInit(self):
        try:
            self._real.nvmlInit()
        except self._real.NVMLError as err:
            self.snap["init"] = {"error": type(err).__name__.replace("NVMLError_", "")}
            raise

    def nvmlDeviceGetCount(self):
        try:
            n = self._real.nvmlDeviceGetCount()
        except self._real.NVMLError as err:
            self.snap["count_error"] = type(err).__name__.replace("NVMLError_", "")
            raise
        self.snap["devices"] = [{} for _ in range(n)]
        return n

    def nvmlDeviceGetHandleByIndex(self, i):
        try:
            return _RecHandle(self._real.nvmlDeviceGetHandleByIndex(i), i)
        except self._real.NVMLError as err:
            self.snap["devices"][i]["handle_error"] = type(err).__name__.replace("NVMLError_", "")
            raise

    def nvmlDeviceGetMigDeviceHandleByIndex(self, h, i):
        slots = self.snap["devices"][h.device].setdefault("mig_devices", [])
        while len(slots) <= i:
            slots.append(None)
        real = self._real.nvmlDeviceGetMigDeviceHandleByIndex(h.real, i)
        slots[i] = {}
        return _RecHandle(real, h.device, i)

    def _pair_call(self, fn, a, b, *args):
        key = f"{min(a.device, b.device)},{max(a.device, b.device)}"
        rec = self.snap["pairs"].setdefault(key, {})
        real = getattr(self._real, fn)
        return self._store(rec, fn, args[0] if args else None, lambda: real(a.real, b.real, *args))

    def nvmlDeviceGetTopologyCommonAncestor(self, a, b):
        return self._pair_call("nvmlDeviceGetTopologyCommonAncestor", a, b)

    def nvmlDeviceGetP2PStatus(self, a, b, index):
        return self._pair_call("nvmlDeviceGetP2PStatus", a, b, index)

    def process_name(self, pid: int) -> str | None:
        from advisor.probe.nvml_source import default_process_name

        name = default_process_name(pid)
        self.snap["process_names"][str(pid)] = name
        return name


def record() -> dict[str, Any]:
    """Probe this machine through a recorder and return the snapshot."""
    from advisor.probe.nvml_source import load_pynvml, read_snapshot

    try:
        real = load_pynvml()
    except ImportError:
        return {"format": FORMAT, "init": {"error": "LibraryNotFound"}}
    rec = RecordingNvml(real)
    read_snapshot(rec, process_name=rec.process_name)
    return rec.snap


if __name__ == "__main__":  # pragma: no cover - run by hand on a GPU machine
    json.dump(record(), sys.stdout, indent=1)
    sys.stdout.write("\n")
