"""Raw NVML answers -> ProbeResult: match each card to the GPU table, derive what is missing."""

from __future__ import annotations

import dataclasses
from collections import Counter
from typing import Callable

from advisor.gpu_spec import GpuSpec
from advisor.probe.derive import BANDWIDTH_FORMULA, derived_spec, theoretical_bandwidth_gbs
from advisor.probe.model import (
    MATCH_DERIVED, MATCH_NAME, MATCH_PCI_ID, Bandwidth, GpuProcess, Link, ProbedDevice, ProbeResult,
    SpecOverride,
)
from advisor.probe.nvml_source import RawDevice, RawPair, RawSnapshot

# nvmlGpuTopologyLevel_t -> the nvidia-smi topo -m abbreviation.
TOPOLOGY_LEVELS = {0: "SAME-BOARD", 10: "PIX", 20: "PXB", 30: "PHB", 40: "NODE", 50: "SYS"}
# nvmlGpuP2PStatus_t
P2P_STATUS = {0: "ok", 1: "chipset not supported", 2: "GPU not supported",
              3: "IOH topology not supported", 4: "disabled by regkey", 5: "not supported", 6: "unknown"}

MEMORY_TOLERANCE = 0.10      # probed vs table memory size before we call it a different card
BANDWIDTH_TOLERANCE = 0.05
POWER_TOLERANCE = 0.97       # a limit under 97 % of TDP is worth saying

Lookup = Callable[[str], "GpuSpec | None"]


def _default_lookups() -> tuple[Lookup, Callable[..., "GpuSpec | None"]]:
    from advisor.gpu_table import find_by_name, find_by_pci_device_id

    return find_by_pci_device_id, find_by_name


def build_result(raw: RawSnapshot, *, by_pci: Lookup | None = None, by_name=None) -> ProbeResult:
    if by_pci is None or by_name is None:
        by_pci, by_name = _default_lookups()
    cuda = _cuda_version(raw.cuda_driver_version)
    devices = tuple(probed_device(d, by_pci, by_name) for d in raw.devices)
    topology = tuple(_link(p, raw.devices) for p in raw.pairs)
    processes = tuple(
        GpuProcess(d.index, p.pid, p.name, p.used_memory_bytes, p.own)
        for d in raw.devices for p in (d.processes or ())
    )
    notes = []
    models = Counter(d.spec.id for d in devices)
    if len(models) > 1:
        notes.append("heterogeneous box: " + ", ".join(f"{n} x {i}" for i, n in models.items())
                     + "; planning uses one model at a time (--gpu ID --gpus N)")
    return ProbeResult(
        status=raw.status, message=_message(raw, devices), driver_version=raw.driver_version,
        cuda_driver_version=cuda, nvml_version=raw.nvml_version, devices=devices,
        topology=topology, processes=processes, na=raw.failures, notes=tuple(notes),
    )


def _cuda_version(v: int | None) -> str | None:
    return None if v is None else f"{v // 1000}.{(v % 1000) // 10}"


def _message(raw: RawSnapshot, devices: tuple[ProbedDevice, ...]) -> str:
    if raw.status != "ok":
        return raw.message
    names = Counter(d.label for d in devices)
    what = ", ".join(f"{n} x {name}" if n > 1 else name for name, n in names.items())
    return f"{len(devices)} NVIDIA GPU{'s' if len(devices) != 1 else ''}: {what}"


def _match(dev: RawDevice, by_pci: Lookup, by_name) -> tuple[GpuSpec | None, str]:
    if dev.pci_device_id:
        spec = by_pci(dev.pci_device_id)
        if spec is not None:
            return spec, MATCH_PCI_ID
    if dev.name:
        spec = by_name(dev.name)
        if spec is not None:
            return spec, MATCH_NAME
    return None, MATCH_DERIVED


def probed_device(dev: RawDevice, by_pci: Lookup, by_name) -> ProbedDevice:
    width, mem_clock = dev.memory_bus_width_bits, dev.max_mem_clock_mhz
    bw_value = theoretical_bandwidth_gbs(width, mem_clock)   # None unless both are known
    bandwidth = (Bandwidth(bw_value, width, mem_clock, BANDWIDTH_FORMULA)
                 if bw_value is not None and width and mem_clock else None)
    spec, how = _match(dev, by_pci, by_name)
    notes: list[str] = []
    overrides: list[SpecOverride] = []
    if spec is None:
        spec, derived_notes = derived_spec(dev)
        notes.append("not in the GPU table: figures derived from NVML and the compute capability")
        notes.extend(derived_notes)
    else:
        spec, overrides = _apply_overrides(spec, dev)
        notes.extend(_table_checks(spec, dev, bw_value))
    notes.extend(_power_note(spec, dev))
    if dev.mig_current:
        notes.append(f"MIG is enabled: engines see {len(dev.mig_devices)} MIG slice(s), each with its own "
                     "SMs and memory, not the whole GPU")
    elif dev.mig_pending:
        notes.append("MIG mode will switch on at the next GPU reset")
    return ProbedDevice(dev.index, dev, spec, how, bandwidth, tuple(overrides), tuple(notes))


def _apply_overrides(spec: GpuSpec, dev: RawDevice) -> tuple[GpuSpec, list[SpecOverride]]:
    """Keep the table entry, but trust the card for what it can report exactly (memory size)."""
    overrides = []
    if dev.memory_total_bytes and spec.memory_gb:
        # Marketing "GB" is GiB-sized (a 24 GB card reports 24 GiB); compare like with like.
        probed = round(dev.memory_total_bytes / 2**30, 1)
        if abs(probed - spec.memory_gb) > MEMORY_TOLERANCE * spec.memory_gb:
            overrides.append(SpecOverride(
                "memory_gb", spec.memory_gb, probed,
                f"card reports {probed} GiB, table says {spec.memory_gb:g} GB (modded or unlisted "
                "variant): planning uses the probed size",
            ))
            spec = dataclasses.replace(
                spec, memory_gb=probed,
                notes=(spec.notes + f" Memory size overridden by the probe: {probed} GiB.").strip(),
            )
    return spec, overrides


def _table_checks(spec: GpuSpec, dev: RawDevice, bw: float | None) -> list[str]:
    notes = []
    if bw is not None and spec.bandwidth_gbs:
        if abs(bw - spec.bandwidth_gbs) > BANDWIDTH_TOLERANCE * spec.bandwidth_gbs:
            notes.append(f"NVML implies {bw:g} GB/s memory bandwidth, the table {spec.bandwidth_gbs:g} GB/s "
                         "(memory clock changed or a different memory configuration)")
    if dev.cc is not None and dev.cc != spec.cc:
        notes.append(f"NVML reports compute capability {dev.cc[0]}.{dev.cc[1]}, the table "
                     f"{spec.cc_str}: check the match")
    return notes


def _power_note(spec: GpuSpec, dev: RawDevice) -> list[str]:
    limit = dev.enforced_power_limit_w or dev.power_limit_w
    if limit is None or not spec.tdp_w or spec.derived:
        return []
    if limit < POWER_TOLERANCE * spec.tdp_w:
        return [f"power limit {limit:g} W is below the {spec.tdp_w:g} W TDP: expect lower clocks in "
                "compute-bound work (prefill, large batches)"]
    return []


def _bus_key(bus_id: str | None) -> tuple[int, int, int, int] | None:
    """'00000000:01:00.0' or '0000:01:00.0' -> (domain, bus, device, function)."""
    if not bus_id:
        return None
    try:
        dom, bus, rest = bus_id.strip().lower().rsplit(":", 2)
        dev, fn = rest.split(".")
        return int(dom, 16), int(bus, 16), int(dev, 16), int(fn, 16)
    except ValueError:
        return None


def _link(pair: RawPair, devices: tuple[RawDevice, ...]) -> Link:
    a, b = devices[pair.a], devices[pair.b]
    b_key = _bus_key(b.pci_bus_id)
    direct = sum(1 for link in (a.nvlinks or ()) if link.active and b_key and _bus_key(link.remote_bus_id) == b_key)
    path = TOPOLOGY_LEVELS.get(pair.common_ancestor) if pair.common_ancestor is not None else None
    p2p_nvlink = P2P_STATUS.get(pair.p2p_nvlink, "unknown") if pair.p2p_nvlink is not None else None
    if direct:
        kind = "nvlink"
    elif p2p_nvlink == "ok":  # NVLink reachable without a direct link: through NVSwitch
        kind = "nvswitch"
    elif path is not None:
        kind = "pcie"
    else:
        kind = "unknown"
    return Link(
        a=pair.a, b=pair.b, kind=kind, nvlink_links=direct, pcie_path=path,
        p2p_read=P2P_STATUS.get(pair.p2p_read, "unknown") if pair.p2p_read is not None else None,
        p2p_nvlink=p2p_nvlink, na=pair.failures,
    )
