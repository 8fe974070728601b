"""The card's rates as the roofline charges them: MMA and CUDA-core FLOP/s, warp-instruction issue and
DRAM bandwidth per kernel class, compute and issue scaled by the power-limit clock factor. A rate the
GPU table lacks is never taken as infinite: its time is 0 and its name goes into ``unknown``, so the
step is a lower bound and the plan reports the speed as N/A."""

from __future__ import annotations

from dataclasses import dataclass

from advisor.cost.efficiency import Efficiencies


@dataclass(frozen=True)
class Rates:
    eff: Efficiencies
    clock_factor: float         # <1 under a power limit (compute and issue rate only)
    bandwidth_gbs: float        # DRAM denominator (table, calibration or override)

    def mma_rate(self, mma: str) -> float | None:
        """FLOP/s of an MMA class (its BF16/FP16 rate when the table lacks it); None: no peak known."""
        v = self.eff.mma_tflops.get(mma)
        if v is None:
            v = self.eff.mma_tflops.get("hmma_bf16") or self.eff.mma_tflops.get("hmma_f16")
        return v * 1e12 * self.clock_factor if v else None

    def cuda_core_time(self, flops: float, unknown: set[str]) -> float:
        rate = self.eff.cuda_core_tflops
        if not rate:
            if flops > 0:
                unknown.add("CUDA-core FMA rate (GEMV)")
            return 0.0
        return flops / (rate * 1e12 * self.clock_factor)

    def issue(self) -> float | None:
        return self.eff.issue_rate * self.clock_factor if self.eff.issue_rate > 0 else None

    def mma_time(self, flops: float, mma: str, unknown: set[str]) -> float:
        rate = self.mma_rate(mma)
        if rate is None:
            if flops > 0:
                unknown.add(f"tensor peak for {mma}")
            return 0.0
        return flops / rate

    def peak_time(self, flops: float, mma: str, e: float, unknown: set[str]) -> float:
        """FLOPs at the card's table peak for ``mma`` times a measured efficiency ``e``."""
        peak = self.eff.peak_tflops.get(mma) or self.eff.peak_tflops.get("hmma_bf16") \
            or self.eff.peak_tflops.get("hmma_f16")
        if not peak:
            return self.mma_time(flops, mma, unknown)
        return flops / (peak * 1e12 * max(e, 1e-3) * self.clock_factor)

    def issue_time(self, warp_instr: float, unknown: set[str]) -> float:
        rate = self.issue()
        if rate is None:
            if warp_instr > 0:
                unknown.add("SM clock (dequant issue rate)")
            return 0.0
        return warp_instr / rate

    def bw(self, cls: str) -> float:
        """DRAM bytes/s a kernel streaming format ``cls`` reaches."""
        return self.bandwidth_gbs * 1e9 * self.eff.bandwidth_eff.get(cls, self.eff.bandwidth_eff["bf16"])
