"""What a step costs, as the roofline (advisor.cost.roofline) reports it: per module group at one M
(PartCost), one decode step (StepCost), one prefill (PrefillCost), one step's attention (Attention),
and the per-group derivation a plan shows."""

from __future__ import annotations

from dataclasses import dataclass

from advisor.cost.derived import Derived
from advisor.cost.weights import Part
from advisor.kernel_path.model import KernelRange


@dataclass(frozen=True)
class PartCost:
    """One module group at one M: the kernel that runs and what it costs, per GPU."""

    part: Part
    rows: float                # M of one call (experts: rows per touched expert)
    kernel: KernelRange
    family: str                # efficiency.family
    launches: int              # weight passes (GEMV launches that re-read the weights)
    weight_bytes: float        # weights read, all passes
    copy_bytes: float          # FP16 copy written and read back (dequant to memory)
    flops: float
    t_bytes: float
    t_compute: float           # MMA or CUDA-core time + dequant issue
    t_dequant: float
    t_exposed: float           # the share of min(t_bytes, t_compute) that does not overlap
    bandwidth_eff: tuple[float, str]
    compute_source: str
    t_floor: float = 0.0       # measured fixed cost of the calls (GEMM floor, MoE routing/permute)
    measured: str = ""         # the measured table behind the time, and how it was carried to this card
    calls: float = 0.0         # kernels the measurement covers (their launch gaps are in it)

    @property
    def seconds(self) -> float:
        return max(self.t_bytes, self.t_compute) + self.t_exposed + self.t_floor

    def to_json(self) -> dict:
        k = self.kernel
        return {"module": self.part.name, "kind": self.part.kind, "gemm": self.part.gemm and self.part.kind != "embed",
                "kernel": self.kernel_label, "rows_M": _r(self.rows),
                "kernel_rows": k.label, "mma": k.mma, "dequant": k.dequant, "family": self.family,
                "threshold_source": k.source, "launches": self.launches, "weight_bytes": _r(self.weight_bytes),
                "read_bytes_per_element": k.read_bytes_per_element,
                "copy_bytes": _r(self.copy_bytes), "flops": _r(self.flops), "t_bytes": _r(self.t_bytes),
                "t_compute": _r(self.t_compute), "t_dequant": _r(self.t_dequant), "t_exposed": _r(self.t_exposed),
                "t_floor": _r(self.t_floor), "seconds": _r(self.seconds),
                "bandwidth_eff": self.bandwidth_eff[0], "bandwidth_eff_source": self.bandwidth_eff[1],
                "compute_source": self.compute_source,
                "measured_source": self.measured or "none: estimate (see bandwidth_eff_source, compute_source)"}


    @property
    def kernel_label(self) -> str:
        if self.part.kind == "embed":
            return "row gather (embedding lookup)"
        if not self.part.gemm:
            return "no GEMM (weights read once per step)"
        return self.kernel.kernel or "(as explained)"


def _r(v: float) -> float:
    """Six significant digits, as every cost figure is written to JSON."""
    return float(f"{v:.6g}")


@dataclass(frozen=True)
class StepCost:
    seconds: float
    t_bytes: float
    t_compute: float
    t_fixed: float
    bound: str                 # bandwidth | compute | overhead
    bytes_read: float          # per GPU
    flops: float               # per GPU
    derived: Derived
    unknown: tuple[str, ...] = ()   # rates the table lacks: seconds is then a lower bound
    parts: tuple[PartCost, ...] = ()   # per module group: the kernel at this M and its terms
    t_exposed: float = 0.0     # load/compute time that does not overlap (added to max(t_bytes, t_compute))
    t_host: float = 0.0        # the engine's host time per step (scheduler, sampler), part of t_fixed
    sources: tuple[str, ...] = ()      # the measured tables behind the step's terms


@dataclass(frozen=True)
class PrefillCost:
    seconds: float
    tok_s: float
    t_bytes: float
    t_compute: float
    t_dequant: float
    t_fixed: float
    chunks: int
    derived: Derived
    unknown: tuple[str, ...] = ()   # rates the table lacks: seconds is then a lower bound
    parts: tuple[PartCost, ...] = ()   # per module group, for a full chunk
    t_exposed: float = 0.0
    sources: tuple[str, ...] = ()


@dataclass(frozen=True)
class Attention:
    """One step's attention over every KV layer: measured per layer, or the bytes/FLOPs estimate."""

    t_bytes: float
    t_compute: float
    t_floor: float
    calls: float                # attention kernels the measurement covers
    source: str                 # the measured table ("" : estimate)

    @property
    def seconds(self) -> float:
        return max(self.t_bytes, self.t_compute) + self.t_floor


def module_groups_derived(cost: StepCost | PrefillCost, what: str) -> Derived:
    """Per module group: the kernel charged at the M of ``cost`` and every term with its source."""
    groups = [c.to_json() for c in cost.parts]
    total = sum(c.seconds for c in cost.parts)
    m = cost.derived.inputs.get("M", "")
    estimated = [c.part.name for c in cost.parts if not c.measured and c.part.gemm and c.part.kind != "embed"]
    return Derived(total, "s", f"sum over module groups of floor + max(t_bytes, t_compute) + t_exposed ({what}, "
                   f"M = {m})", {"M": m, "module_groups": groups},
                   "each group's kernel at M from its explain decision (threshold_source); measured_source names "
                   "the measured table of each group"
                   + (f"; estimate for {len(estimated)} group(s) without a measured kernel (bandwidth_eff_source, "
                      "compute_source, assumptions)" if estimated else ""))
