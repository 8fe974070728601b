"""Tensor-parallel all-reduce time per layer from the link between the GPUs.

The link estimate here is the fallback: where an all-reduce over the same link kind was measured
(advisor.cost.measured.allreduce_time, the nearest system's curve scaled to this link) the cost model
uses that; ``raw_gbs`` is what the measured curve is scaled by."""

from __future__ import annotations

from dataclasses import dataclass

from advisor.cost.derived import Derived
from advisor.gpu_spec import GpuSpec

# GB/s per lane per direction after 128b/130b (gen3+) encoding: PCI-SIG base specifications.
PCIE_LANE_GBS = {1: 0.25, 2: 0.5, 3: 0.985, 4: 1.969, 5: 3.938, 6: 7.563}
PCIE_EFF = (0.80, "estimate: achievable share of PCIe payload bandwidth for NCCL transfers")
NVLINK_EFF = (0.80, "estimate: achievable share of NVLink bandwidth for NCCL ring all-reduce")
LATENCY_US = {"nvlink": (10.0, "estimate: small-message all-reduce latency over NVLink"),
              "pcie": (25.0, "estimate: small-message all-reduce latency over PCIe (no NVLink)")}
DEFAULT_PCIE = (4, 16, "assumed PCIe gen4 x16 (not in the table or probe)")


@dataclass(frozen=True)
class Link:
    kind: str              # nvlink | pcie
    gbs: float             # achievable per-direction bandwidth
    latency_s: float
    description: str
    source: str
    raw_gbs: float = 0.0   # theoretical per-direction bandwidth (what measured all-reduce curves scale by)

    def allreduce(self, nbytes: float, n: int) -> Derived:
        """Ring all-reduce of ``nbytes`` over ``n`` GPUs: latency + 2(N-1)/N x bytes / link bandwidth."""
        if n <= 1:
            return Derived(0.0, "s", "no tensor parallelism", {}, "")
        t = self.latency_s + 2.0 * (n - 1) / n * nbytes / (self.gbs * 1e9)
        return Derived(t, "s", "latency + 2(N-1)/N x bytes / link_GBps",
                       {"latency_s": self.latency_s, "N": n, "bytes": nbytes, "link_GBps": self.gbs},
                       self.source)


# Datacenter boards sold as PCIe cards (H100 PCIe, A100 PCIe) take an optional NVLink bridge
# (H100 datasheet: "NVLink bridge 600 GB/s"): without a probed topology nothing says it is fitted.
PCIE_FORM_NOTE = ("{name} is a PCIe card whose NVLink bridge is optional and no probed topology says it is "
                  "fitted: PCIe assumed (pass --nvlink if the cards are bridged)")


def pcie_form_factor(gpu: GpuSpec) -> bool:
    return "pcie" in gpu.id.lower() or "pcie" in gpu.name.lower()


def link_for(gpu: GpuSpec, pcie_gen: int | None = None, pcie_lanes: int | None = None,
             nvlink: bool | None = None) -> Link:
    """The link TP all-reduces cross. ``nvlink``: True/False from the probed topology or --nvlink /
    --no-nvlink; None: NVLink for datacenter SXM-class parts that have it, PCIe otherwise."""
    guessed = nvlink is None
    pcie_card = bool(gpu.nvlink_gbs) and gpu.segment == "datacenter" and pcie_form_factor(gpu)
    if guessed:
        nvlink = pcie_gen is None and bool(gpu.nvlink_gbs) and gpu.segment == "datacenter" and not pcie_card
        why = "GPU table nvlink_gbs (SXM-class part: NVLink is built in)"
    else:
        why = "probed topology or --nvlink"
    if nvlink and gpu.nvlink_gbs:
        per_dir = gpu.nvlink_gbs / 2 * NVLINK_EFF[0]
        lat, lat_src = LATENCY_US["nvlink"]
        return Link("nvlink", per_dir, lat * 1e-6, f"NVLink {gpu.nvlink_gbs:g} GB/s bidirectional",
                    f"{why}; nvlink_gbs/2 x {NVLINK_EFF[0]} ({NVLINK_EFF[1]}); {lat_src}", gpu.nvlink_gbs / 2)
    gen = pcie_gen or gpu.pcie_gen
    lanes = pcie_lanes or gpu.pcie_lanes
    src = "GPU table / probe"
    if gen is None or lanes is None:
        gen, lanes = gen or DEFAULT_PCIE[0], lanes or DEFAULT_PCIE[1]
        src = DEFAULT_PCIE[2]
    raw = PCIE_LANE_GBS.get(gen, PCIE_LANE_GBS[4]) * lanes
    gbs = raw * PCIE_EFF[0]
    lat, lat_src = LATENCY_US["pcie"]
    if guessed and pcie_card and pcie_gen is None:
        src = PCIE_FORM_NOTE.format(name=gpu.name) + "; " + src
    return Link("pcie", gbs, lat * 1e-6, f"PCIe gen{gen} x{lanes}",
                f"{src}; per-lane rate (PCI-SIG) x {PCIE_EFF[0]} ({PCIE_EFF[1]}); {lat_src}", raw)
