"""GPU probe: what NVIDIA cards this machine has, matched to the GPU table.

``probe()`` never raises for NVML trouble: no driver, no GPU and unanswered queries come back as
a status and explicit N/A fields. nvidia-ml-py is imported only when probing.
"""

from __future__ import annotations

from typing import Any

from advisor.probe.model import GpuProcess, Link, ProbedDevice, ProbeResult, SpecOverride
from advisor.probe.selection import GpuSelection, resolve_gpus

__all__ = ["probe", "ProbeResult", "ProbedDevice", "Link", "GpuProcess", "SpecOverride",
           "GpuSelection", "resolve_gpus"]


def probe(nvml: Any = None) -> ProbeResult:
    """Probe this machine (or the given pynvml-like module) and match each GPU to the table."""
    from advisor.probe.build import build_result
    from advisor.probe.nvml_source import read_snapshot

    try:
        raw = read_snapshot(nvml)
    except Exception as err:  # a binding bug or a dying driver must not take the TUI down
        return ProbeResult("error", f"NVML probe failed ({type(err).__name__}: {err})", None, None, None)
    return build_result(raw)
