"""Kernel-class efficiencies and per-format constants, each with its published source.

Defaults come from measurements written down in the project's field notes (vLLM Marlin on an
RTX 3090), from instruction counts read in Marlin's source, or are labelled "estimate"; the one
calibrated constant (DEQUANT_OVERLAP) says which measurement it reproduces. A calibration file
from ``microbench`` replaces them for that GPU.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from advisor.cost.derived import Assumption
from advisor.gpu_spec import NOT_SUPPORTED, GpuSpec

FIELD_NOTES_3 = "field-notes §3 (vLLM Marlin measured on RTX 3090)"

# Scheme (what really runs, LayerDecision.effective_scheme) -> kernel class.
KERNEL_CLASS = {
    "W4A16-NVFP4": "w4a16_nvfp4", "W4A16-MXFP4": "w4a16_nvfp4",
    "W4A16-INT4": "w4a16_int4",
    "W8A16-FP8": "w8a16_fp8", "W8A16-INT8": "w8a16_fp8",
    "BF16": "bf16", "FP16": "bf16",
    "W8A8-FP8": "a8_native", "W8A8-INT8": "a8_native", "W4A8-FP8": "a8_native",
    "W4A4-NVFP4": "a4_native", "W4A4-MXFP4": "a4_native",
}
WEIGHT_ONLY = ("w4a16_nvfp4", "w4a16_int4", "w8a16_fp8")

# Fraction of DRAM bandwidth a kernel class streams at M=1 (decode).
_MARLIN_BW = 0.925   # midpoint of the measured 91-94 %
BANDWIDTH_EFF = {
    "w4a16_nvfp4": (_MARLIN_BW, f"Marlin decode 91-94 % of DRAM bandwidth, {FIELD_NOTES_3}"),
    "w4a16_int4": (_MARLIN_BW, f"Marlin decode 91-94 % of DRAM bandwidth, {FIELD_NOTES_3}"),
    "w8a16_fp8": (_MARLIN_BW, f"Marlin decode 91-94 % of DRAM bandwidth, {FIELD_NOTES_3}"),
    "bf16": (_MARLIN_BW, "estimate: a 16-bit GEMV streams like Marlin (same measurement); calibrate"),
    "a8_native": (0.90, "estimate: native FP8/INT8 GEMM at M=1 plus activation quantize; calibrate"),
    "a4_native": (0.90, "estimate: native FP4 GEMM at M=1 plus activation quantize; calibrate"),
    "kv": (0.85, "estimate: attention kernels reading paged KV; calibrate"),
}

# MoE experts at small M: a grouped GEMM streams top_k small expert matrices per layer through
# gathered token rows (few CTAs per expert, routing indirection), not one long dense weight.
MOE_BANDWIDTH_EFF = (0.6, "estimate: grouped MoE GEMM (fused_moe / Marlin MoE) at decode streams top_k small "
                     "expert matrices per layer through gathered rows, below dense Marlin's 91-94 % "
                     "(field-notes §3); calibrate with microbench")

# Fraction of the table's dense tensor peak a large GEMM reaches.
COMPUTE_EFF = (0.99, "estimate (upper end): raw mma.sync was measured at 99 % of the per-SM tensor peak "
               "(gpu-specs.md OBS, RTX 5090 FP4); a whole GEMM reaches less: calibrate with microbench")

# Dequant: thread instructions per weight element to turn a stored value into an MMA input.
MARLIN_DEQUANT = "vllm csrc/quantization/marlin/dequant.h"
DEQUANT_INSTR = {
    "w8a16_fp8": (1.75, "E4M3->FP16 and/shift/or, ~7 instructions per 4 values (scales folded at load), "
                  + FIELD_NOTES_3),
    "w4a16_nvfp4": (2.35, f"inferred from {MARLIN_DEQUANT} dequant<half2, kFE2M1f, true>: and/shift/or, ~7 "
                    "instructions per 4 values, + 2 hmul2 per 4 values for the E4M3 block scale + its decode "
                    "once per 16 values"),
    "w4a16_int4": (1.5, f"inferred from {MARLIN_DEQUANT} dequant<half2, kU4B8>: 2 lop3 + hsub2 + hfma2 per 4 "
                   "values, + 2 hmul2 per 4 values for the group scale (~12 instructions per 8 values)"),
}
# Share of the dequant issue time hidden behind the tensor-core pipe (the ALU converts the next tile
# while the MMAs of this one run). Calibrated, not measured: with it the model puts Marlin prefill at
# M=8192 on an RTX 3090 at 95-97 % of BF16 for the FP8, NVFP4 and INT4 instruction counts above, as
# field-notes §3 measured ("Marlin runs at 95-97 % of BF16 cuBLAS at the same clock"); with no overlap
# NVFP4 would come out at ~93 %.
DEQUANT_OVERLAP = (0.3, "calibrated so Marlin prefill at M=8192 on an RTX 3090 is 95-97 % of BF16, "
                   + FIELD_NOTES_3)
KV_DEQUANT_INSTR = {
    "fp8": (1.75, "estimate: as FP8 weights (the same E4M3->FP16 conversion, " + FIELD_NOTES_3 + ")"),
    "nvfp4": (2.35, f"estimate: as NVFP4 weights (same conversion, {MARLIN_DEQUANT})"),
    "int8": (1.8, "estimate: as FP8 (integer convert + scale)"),
    "int4": (1.5, "estimate: as INT4 weights"),
    "fp4_mx": (3.7, "estimate: as NVFP4"),
}
# Rows of A a weight-only kernel dequantizes a weight tile for (Marlin: thread_m_blocks <= 4 x 16):
# larger M re-dequantizes the tile once per M tile.
DEQUANT_M_TILE = (64, "vLLM Marlin: at most 4 m-blocks of 16 rows per pass (thread_m_blocks <= 4)")
SCHEDULERS_PER_SM = (4, "4 warp schedulers per SM, Turing through Blackwell (NVIDIA architecture whitepapers)")
THREADS_PER_WARP = 32

# MMA class -> GpuSpec peak key (engines accumulate in FP32: fp16 uses the fp32-accumulate rate).
MMA_PEAK = {
    "hmma_bf16": "bf16", "wgmma_bf16": "bf16", "tcgen05_bf16": "bf16",
    "hmma_f16": "fp16_fp32acc",
    "imma_int8": "int8", "wgmma_int8": "int8",
    "imma_int4": "int4",
    "qmma_e4m3": "fp8_fp32acc", "wgmma_e4m3": "fp8_fp32acc", "tcgen05_e4m3": "fp8_fp32acc",
    "tcgen05_mxf8f6f4": "fp8_fp32acc",
    "tcgen05_fp4_block_scaled": "fp4", "mma_sync_fp4_block_scaled": "fp4",
}
# Rows an MMA instruction computes at once: a decode batch below it is padded.
MMA_M_ROWS = {"wgmma": 64, "tcgen05": 128}
MMA_M_ROWS_DEFAULT = 16   # mma.sync m16n8k16
# Small-M GEMMs swap A and B: the weight fills the MMA's M side and the few tokens sit on its N side,
# padded only to the N step (wgmma N = 8..256 step 8; tcgen05 at M=128: N = 16..256 step 16).
SWAP_AB = (64, {"wgmma": 8, "tcgen05": 16},
           "vllm/model_executor/layers/fused_moe/experts/cutlass_moe.py:212-213@0.33.0 ('swap_ab ... M <= 64 "
           "reduces padding'); kernels/linear/scaled_mm/flashinfer.py:150-160@0.33.0 (FlashInfer swapAB for M < 32); "
           "N steps: PTX ISA wgmma / tcgen05.mma shape tables")


def mma_rows(mma: str) -> int:
    for prefix, rows in MMA_M_ROWS.items():
        if mma.startswith(prefix):
            return rows
    return MMA_M_ROWS_DEFAULT


def padded_rows(mma: str, rows: float) -> float:
    """Rows of A the MMA really computes for ``rows`` tokens: up to SWAP_AB's M the tokens sit on the
    N side (padded to its step), above it on the M side (padded to the instruction's M)."""
    limit, steps, _ = SWAP_AB
    for prefix, step in steps.items():
        if mma.startswith(prefix) and rows <= limit:
            return math.ceil(rows / step) * step
    m = mma_rows(mma)
    return math.ceil(rows / m) * m


@dataclass(frozen=True)
class Efficiencies:
    """Resolved efficiencies for one GPU (table defaults or calibration)."""

    dram_gbs: float                       # denominator the bandwidth efficiencies apply to
    bandwidth_eff: dict[str, float]       # kernel class -> fraction of dram_gbs at M=1
    mma_tflops: dict[str, float]          # mma class -> achievable TFLOPS (peak x eff or measured)
    dequant_overhead: dict[str, float]    # kernel class -> measured prefill overhead (calibration only)
    issue_rate: float                     # warp instructions / s (SMs x schedulers x clock); 0 = unknown
    assumptions: tuple[Assumption, ...]
    upper_bound: str = ""                 # non-empty: rates are an upper bound (why), speeds too


# Dense FP16 (FP16-accumulate) tensor FLOP per clock per SM: the same on every segment of a compute
# capability (gpu-specs.md "Derivation rules"), so peak / (SMs x rate) is the clock NVIDIA's peak implies.
FP16_FLOP_PER_CLK_SM = {(7, 5): 1024, (8, 0): 2048, (8, 6): 1024, (8, 9): 1024, (9, 0): 4096,
                        (10, 0): 8192, (10, 3): 8192, (11, 0): 8192, (12, 0): 1024, (12, 1): 1024}
IMPLIED_CLOCK_SOURCE = ("gpu-specs.md 'Implied tensor clocks from NVIDIA peaks' (e.g. DGX Spark ~2540 MHz, "
                        "observed ~2460): fp16_fp16acc peak / (SMs x FP16 FLOP/clk/SM)")
# GPUs whose table entry has no clock or tensor peaks, and the entry whose figures bound them from above.
PEAK_UPPER_BOUND = {
    "rtx-pro-6000-bw-server": ("rtx-pro-6000-bw-ws", "gpu-specs.md RTX PRO 6000 Server Edition: 'Server-specific "
                               "clocks/tensor peaks not found: use the Workstation figures only as an upper bound'"),
}


def implied_clock_mhz(gpu: GpuSpec) -> float | None:
    """The clock the table's dense FP16 peak implies, where the table has no clock."""
    rate = FP16_FLOP_PER_CLK_SM.get(tuple(gpu.cc))
    peak = _peak(gpu, "fp16_fp16acc")
    if not rate or not peak or not gpu.sm_count:
        return None
    return peak * 1e12 / (gpu.sm_count * rate) / 1e6


def _peak(gpu: GpuSpec, key: str) -> float | None:
    v = gpu.peaks.get(key)
    return None if v is None or v is NOT_SUPPORTED else float(v)


def peak_for_mma(gpu: GpuSpec, mma: str) -> tuple[float | None, str]:
    """The table peak (TFLOPS) for an MMA class and the key it came from."""
    key = MMA_PEAK.get(mma)
    if key is None:
        return None, "none"
    v = _peak(gpu, key)
    if v is None and key == "bf16":          # Turing: no BF16, engines run FP16
        key, v = "fp16_fp32acc", _peak(gpu, "fp16_fp32acc")
    return v, key


def _with_upper_bound(gpu: GpuSpec, bound: GpuSpec) -> GpuSpec:
    """``gpu`` with its unknown peaks and clock taken from ``bound`` (figures that can only be lower)."""
    from dataclasses import replace

    peaks = {k: (bound.peaks.get(k) if v is None else v) for k, v in {**bound.peaks, **gpu.peaks}.items()}
    return replace(gpu, peaks=peaks, boost_clock_mhz=gpu.boost_clock_mhz or bound.boost_clock_mhz,
                   tensor_peak_clock_mhz=gpu.tensor_peak_clock_mhz or bound.tensor_peak_clock_mhz)


def resolve(gpu: GpuSpec, calibration=None, mma_classes: tuple[str, ...] = (),
            bound: GpuSpec | None = None) -> Efficiencies:
    """Efficiencies for ``gpu``: defaults, replaced class by class by ``calibration``. ``bound``: the
    table entry (PEAK_UPPER_BOUND) whose peaks and clock stand in, as an upper bound, for unknown ones."""
    out: list[Assumption] = []
    upper = ""
    if bound is not None and gpu.id in PEAK_UPPER_BOUND:
        upper = (f"{gpu.id} has no published clock or tensor peaks: the {bound.id} figures stand in as an upper "
                 f"bound ({PEAK_UPPER_BOUND[gpu.id][1]})")
        gpu = _with_upper_bound(gpu, bound)
        out.append(Assumption("tensor_peaks_upper_bound", bound.id, "", upper))
    cal = calibration if calibration is not None and calibration.gpu_id == gpu.id else None
    cal_src = f"microbench {cal.measured_at}" if cal is not None else ""
    if cal is not None and cal.bandwidth_gbs > 0:
        dram = float(cal.bandwidth_gbs)
        out.append(Assumption("dram_bandwidth", dram, "GB/s", cal_src, calibrated=True))
    else:
        dram = float(gpu.bandwidth_gbs or 0.0)
        out.append(Assumption("dram_bandwidth", dram, "GB/s", f"GPU table {gpu.id}"))
    bw: dict[str, float] = {}
    for cls, (v, src) in BANDWIDTH_EFF.items():
        if cal is not None and cls in cal.kernel_bandwidth_eff:
            bw[cls] = cal.kernel_bandwidth_eff[cls]
            out.append(Assumption(f"bandwidth_eff.{cls}", bw[cls], "fraction", cal_src, calibrated=True))
        else:
            bw[cls] = v
            out.append(Assumption(f"bandwidth_eff.{cls}", v, "fraction", src))
    if cal is not None and "moe_grouped" in cal.kernel_bandwidth_eff:
        bw["moe_grouped"] = cal.kernel_bandwidth_eff["moe_grouped"]
    else:
        bw["moe_grouped"] = MOE_BANDWIDTH_EFF[0]
    mma: dict[str, float] = {}
    for m in dict.fromkeys(mma_classes):
        if cal is not None and m in cal.mma_tflops:
            mma[m] = cal.mma_tflops[m]
            out.append(Assumption(f"mma_tflops.{m}", mma[m], "TFLOPS", cal_src, calibrated=True))
            continue
        peak, key = peak_for_mma(gpu, m)
        if peak is None:
            continue
        mma[m] = peak * COMPUTE_EFF[0]
        out.append(Assumption(f"mma_tflops.{m}", mma[m], "TFLOPS",
                              f"table peak {key}={peak}{' (upper bound)' if upper else ''} x {COMPUTE_EFF[0]} "
                              f"(compute_efficiency)"))
    deq = dict(cal.dequant_overhead) if cal is not None else {}
    for cls, v in deq.items():
        out.append(Assumption(f"dequant_overhead.{cls}", v, "fraction", cal_src, calibrated=True))
    sms, clock = gpu.sm_count or 0, gpu.boost_clock_mhz or gpu.tensor_peak_clock_mhz
    clock_src = f"GPU table {gpu.id}" + (" (upper bound)" if upper else "")
    if not clock:
        clock = implied_clock_mhz(gpu)
        if clock:
            clock = round(clock)
            clock_src = IMPLIED_CLOCK_SOURCE
    if clock and sms:
        issue = sms * SCHEDULERS_PER_SM[0] * clock * 1e6
        out.append(Assumption("sm_clock", clock, "MHz", clock_src))
        out.append(Assumption("issue_rate", issue, "warp instr/s",
                              f"SMs {sms} x {SCHEDULERS_PER_SM[0]} schedulers x {clock} MHz ({SCHEDULERS_PER_SM[1]})"))
    else:
        issue = 0.0
        out.append(Assumption("issue_rate", "N/A", "", f"{gpu.id}: the GPU table has no "
                              f"{'clock' if sms else 'SM count'} and none can be implied from a peak: "
                              "dequant issue time is unknown"))
    if cal is None:
        for cls, (v, src) in DEQUANT_INSTR.items():
            out.append(Assumption(f"dequant_instr_per_element.{cls}", v, "thread instr", src))
        out.append(Assumption("dequant_m_tile", DEQUANT_M_TILE[0], "rows", DEQUANT_M_TILE[1]))
    out.append(Assumption("dequant_overlap", DEQUANT_OVERLAP[0], "fraction", DEQUANT_OVERLAP[1]))
    if any(m.startswith(tuple(SWAP_AB[1])) for m in mma_classes):
        out.append(Assumption("swap_ab_max_m", SWAP_AB[0], "rows", SWAP_AB[2]))
    return Efficiencies(dram, bw, mma, deq, issue, tuple(out), upper)
