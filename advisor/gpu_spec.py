"""The GPU facts every rule and formula reads: one frozen record per GPU (table entry or derived).

Built at the edge (advisor.gpu_table loads profiles/gpus.yaml; advisor.probe derives one for an
unknown device). Peaks are DENSE tensor-core rates; a format the architecture lacks is
``NOT_SUPPORTED``, an unknown figure is ``None`` — never conflate the two.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal, Union, get_args

# Keys of `peaks` (TFLOPS, TOPS for int8/int4).
PEAK_KEYS = (
    "fp16_fp32acc", "fp16_fp16acc", "bf16", "tf32",
    "fp8_fp32acc", "fp8_fp16acc", "fp6", "fp4", "int8", "int4",
)


class _NotSupported:
    """Marker: the architecture's tensor cores lack this input format."""

    _inst = None

    def __new__(cls):
        if cls._inst is None:
            cls._inst = super().__new__(cls)
        return cls._inst

    def __repr__(self) -> str:
        return "NOT_SUPPORTED"

    def to_json(self) -> str:
        return "not-supported"


NOT_SUPPORTED = _NotSupported()
Peak = Union[float, None, _NotSupported]

Arch = Literal["turing", "ampere", "ada", "hopper", "blackwell", "unknown"]
# The architecture families profiles/gpus.yaml and profiles/arch.yaml may name: the one list (a new family is
# added here, then in the data).
ARCHS: tuple[str, ...] = tuple(a for a in get_args(Arch) if a != "unknown")


@dataclass(frozen=True)
class GpuSpec:
    id: str                                  # e.g. "rtx-3090"
    name: str                                # marketing name
    arch: str                                # turing | ampere | ada | hopper | blackwell | unknown
    cc: tuple[int, int]                      # compute capability, e.g. (8, 6)
    sm_count: int | None
    boost_clock_mhz: float | None
    memory_gb: float | None                  # 10^9 bytes
    memory_type: str | None
    bandwidth_gbs: float | None              # 10^9 B/s, theoretical
    l2_mb: float | None
    tdp_w: float | None
    nvlink_gbs: float | None                 # total bidirectional per GPU; None = no NVLink
    peaks: dict[str, Peak] = field(default_factory=dict)   # keys: PEAK_KEYS
    aliases: tuple[str, ...] = ()            # other marketing/NVML names used to match a probe
    pci_device_ids: tuple[str, ...] = ()     # "0x2204" style (device id only)
    segment: str | None = None               # consumer | workstation | datacenter | embedded
    tensor_peak_clock_mhz: float | None = None
    pcie_gen: int | None = None
    pcie_lanes: int | None = None
    confidence: str = "high"                 # high | medium | low | derived
    derived: bool = False                    # True: built from NVML values, not from the table
    derived_fields: tuple[str, ...] = ()
    halved_from_sparse: tuple[str, ...] = ()
    sources: tuple[str, ...] = ()
    notes: str = ""

    @property
    def sm(self) -> int:
        """sm_XY as an int (86 for 8.6)."""
        return self.cc[0] * 10 + self.cc[1]

    @property
    def cc_str(self) -> str:
        return f"{self.cc[0]}.{self.cc[1]}"

    def peak(self, key: str) -> Peak:
        if key not in PEAK_KEYS:
            raise KeyError(key)
        return self.peaks.get(key)

    def supports(self, key: str) -> bool:
        """The table knows a rate for ``key``. Not a capability test: a null peak is unknown, not absent
        (ask advisor.arch_caps, or ``lacks``)."""
        v = self.peaks.get(key)
        return v is not None and v is not NOT_SUPPORTED

    def lacks(self, key: str) -> bool:
        """The table says the tensor cores lack ``key`` (NOT_SUPPORTED), as opposed to not knowing its rate."""
        return self.peaks.get(key) is NOT_SUPPORTED
