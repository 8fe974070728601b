"""What the probe found: frozen records built from the raw NVML answers and the GPU table."""

from __future__ import annotations

from dataclasses import dataclass

from advisor.gpu_spec import GpuSpec
from advisor.probe.nvml_source import NvmlFailure, RawDevice

# How a probed device found its GpuSpec.
MATCH_PCI_ID = "pci-id"
MATCH_NAME = "name"
MATCH_DERIVED = "derived"


@dataclass(frozen=True)
class SpecOverride:
    """A table value replaced by what the card itself reports (e.g. a 22 GB modded 2080 Ti)."""

    field: str
    table_value: object
    probed_value: object
    reason: str


@dataclass(frozen=True)
class Bandwidth:
    """Theoretical DRAM bandwidth from NVML: a derived figure, not a measurement."""

    gbs: float
    bus_width_bits: int
    max_mem_clock_mhz: int
    formula: str


@dataclass(frozen=True)
class ProbedDevice:
    index: int
    nvml: RawDevice               # the raw NVML answers (None fields are N/A, see `na`)
    spec: GpuSpec                 # table entry (with overrides applied) or a derived one
    match: str                    # pci-id | name | derived
    bandwidth: Bandwidth | None   # derived from NVML bus width x max memory clock
    overrides: tuple[SpecOverride, ...] = ()
    notes: tuple[str, ...] = ()

    @property
    def na(self) -> tuple[NvmlFailure, ...]:
        return self.nvml.failures

    @property
    def label(self) -> str:
        return self.nvml.name or self.spec.name


@dataclass(frozen=True)
class Link:
    """How two GPUs reach each other."""

    a: int
    b: int
    kind: str                     # nvlink | nvswitch | pcie | unknown
    nvlink_links: int             # direct active links between a and b
    pcie_path: str | None         # nvidia-smi topo style: PIX PXB PHB NODE SYS (None: unknown)
    p2p_read: str | None          # ok | <reason> | None (N/A)
    p2p_nvlink: str | None
    na: tuple[NvmlFailure, ...] = ()

    @property
    def description(self) -> str:
        if self.kind == "nvlink":
            return f"NVLink x{self.nvlink_links}"
        if self.kind == "nvswitch":
            return "NVLink via NVSwitch"
        if self.kind == "pcie":
            return f"PCIe ({self.pcie_path})" if self.pcie_path else "PCIe"
        return "unknown"


@dataclass(frozen=True)
class GpuProcess:
    """A process holding GPU memory; `own` marks this advisor itself."""

    gpu: int
    pid: int
    name: str | None
    used_memory_bytes: int | None
    own: bool = False


@dataclass(frozen=True)
class ProbeResult:
    status: str                   # ok | no-driver | no-gpu | error
    message: str                  # one line for the user
    driver_version: str | None
    cuda_driver_version: str | None    # "12.4"
    nvml_version: str | None
    devices: tuple[ProbedDevice, ...] = ()
    topology: tuple[Link, ...] = ()
    processes: tuple[GpuProcess, ...] = ()
    na: tuple[NvmlFailure, ...] = ()
    notes: tuple[str, ...] = ()

    @property
    def ok(self) -> bool:
        return self.status == "ok" and bool(self.devices)

    @property
    def foreign_processes(self) -> tuple[GpuProcess, ...]:
        return tuple(p for p in self.processes if not p.own)
