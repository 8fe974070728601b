"""Kernel efficiencies and per-format constants, each with its published source.

Two keys pick a figure: the weight format a kernel streams (KERNEL_CLASS: w4a16_nvfp4, w8a16_fp8, ...)
and the kernel family, i.e. how it turns stored weights into products (``family``: a tiled MMA kernel
that dequantizes in registers like Marlin, a CUDA-core GEMV, a dequantize-to-memory copy followed by a
16-bit GEMM, a native low-precision MMA), each per architecture. Defaults come from measurements in the
project's field notes (vLLM Marlin on an RTX 3090), from instruction counts and pipelines read in the
kernels' source, or are labelled "estimate"; the one calibrated constant (DEQUANT_OVERLAP) says which
measurement it reproduces. A calibration file from ``microbench`` replaces them for that GPU.

Every lookup goes through one small function per concept (``bandwidth_eff``, ``compute_eff``,
``call_floor``, ``dequant_cost``), so measured tables can replace the constants without touching
the cost model's structure.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

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
# field-notes §3 measured ("Marlin runs at 95-97 % of BF16 cuBLAS at the same clock"), both sides' MMAs at
# the measured BF16 GEMM efficiency (A100 tables carried to the 3090): FP8 96.3 %, INT4 96.8 %, NVFP4
# 95.1 %; with no overlap NVFP4 would come out at ~93 %.
DEQUANT_OVERLAP = (0.25, "calibrated so Marlin prefill at M=8192 on an RTX 3090 is 95-97 % of BF16 (MMAs at the "
                   "measured BF16 GEMM efficiency), " + FIELD_NOTES_3)
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

# ---------------------------------------------------------------- kernel families
# How a kernel turns stored weights into products; decided by the explained kernel at each M.
FAMILY_WORDS = {
    "tiled": "tiled MMA kernel, weights dequantized in registers (Marlin-style)",
    "gemv": "CUDA-core GEMV, weights converted in registers (no tensor cores)",
    "copy": "weights dequantized to 16 bits in memory, then a 16-bit GEMM",
    "native": "MMA on the stored format (no dequantization)",
    "cpu": "runs on the CPU",
}


def family(mma: str, dequant: str) -> str:
    if dequant == "cpu":
        return "cpu"
    if dequant == "memory":
        return "copy"
    if mma == "none":
        return "gemv"
    return "tiled" if dequant == "registers" else "native"


# Turing's Marlin has no cp.async: its global->shared copies are plain synchronous loads and
# cp_async_wait is empty, so a warp waits for its tile before it converts and multiplies it.
NO_CP_ASYNC = ("src/devices/cuda/linear/marlin_dense_fp8/marlin.cuh:52-94@d3aea32 (FastLLM's copy of vLLM's "
               "Marlin: below sm_80 cp_async* are plain loads, cp_async_wait is empty)")
# Share of the smaller of a kernel's load time and its compute time that runs concurrently with the
# larger (1: they overlap fully and the kernel takes the max of the two).
LOAD_COMPUTE_OVERLAP = {
    ("tiled", "sm80+"): (1.0, "cp.async multi-stage pipeline: tile loads run under the MMAs of earlier tiles "
                               "(Marlin pipe_stages = 4, src/devices/cuda/linear/fastllm-marlin.cu:84@d3aea32)"),
    ("tiled", "sm75"): (0.5, f"estimate: no cp.async on sm_75 ({NO_CP_ASYNC}): only other resident warps hide a "
                             "warp's loads; half of the shorter term is taken as exposed; calibrate"),
    ("gemv", "any"): (1.0, "estimate: a GEMV keeps many loads in flight per warp and its FMAs interleave with them"),
    ("copy", "any"): (0.0, "the dequantize kernel and the GEMM are separate kernels that run one after the "
                           "other (e.g. fastllm-linear-fp8.cu:1200-1218@d3aea32): nothing overlaps"),
    ("native", "any"): (1.0, "pipelined tensor-core GEMM"),
}
# The dequant issue time hidden behind the tensor-core pipe, per family and arch.
DEQUANT_OVERLAP_BY = {
    ("tiled", "sm80+"): None,   # DEQUANT_OVERLAP (calibrated on sm_86)
    ("tiled", "sm75"): (0.0, f"no cp.async on sm_75 ({NO_CP_ASYNC}): the conversion of a tile waits for its "
                             "synchronous load instead of running under the previous tile's MMAs"),
    ("gemv", "any"): (0.0, "a CUDA-core GEMV has no tensor-core pipe to hide conversions behind: they share "
                           "the issue slots with the FMAs"),
    ("copy", "any"): (0.0, "a separate dequantize kernel: its conversions run alone"),
}
# Fraction of DRAM bandwidth per family where no per-format figure applies (tiled and native kernels use
# BANDWIDTH_EFF by format).
FAMILY_BANDWIDTH_EFF = {
    ("tiled", "sm75"): (None, f"field-notes §3 measured Marlin on sm_86; on sm_75 its loads are synchronous "
                              f"({NO_CP_ASYNC}) and the figure is unmeasured: estimate, calibrate"),
    ("gemv", "any"): (0.85, "estimate: a CUDA-core GEMV streaming 128-bit coalesced weight loads (FastLLM: "
                            "fastllm-linear-fp8.cu:346-425@d3aea32) below Marlin's measured 91-94 %; calibrate"),
    ("copy", "any"): (0.90, "estimate: the dequantize kernel and cuBLAS both stream linearly; calibrate"),
}
# FP32 lanes per SM (CUDA-core FMA rate = lanes x 2 FLOP x SMs x clock): NVIDIA architecture whitepapers.
FP32_LANES_PER_SM = {(7, 0): 64, (7, 5): 64, (8, 0): 64, (8, 6): 128, (8, 7): 128, (8, 9): 128, (9, 0): 128,
                     (10, 0): 128, (10, 3): 128, (11, 0): 128, (12, 0): 128, (12, 1): 128}
FP32_LANES_SOURCE = ("NVIDIA architecture whitepapers: 64 FP32 lanes per SM on Volta/Turing/GA100, 128 on "
                     "GA10x, Ada, Hopper, Blackwell")
CUDA_CORE_EFF = (0.8, "estimate: share of the FP32 FMA rate a GEMV's multiply-accumulate loop reaches; calibrate")
# A GEMM call cannot finish faster than this (beyond the per-kernel gap the engine profile charges).
CALL_FLOOR_S = (0.0, "no floor beyond the per-kernel gap the engine profile already charges in t_fixed "
                     "(step_overhead.graph_us_per_kernel); a measured per-call latency replaces it")
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
    sm: int = 86                          # the GPU's sm: picks per-architecture figures
    cuda_core_tflops: float | None = None   # achievable FP32 FMA rate of the CUDA cores; None = unknown
    calibrated: frozenset = frozenset()   # kernel classes whose bandwidth was measured on this GPU
    l2_bytes: float = 0.0                 # L2 size: a GEMV re-launch finds a weight this small still cached
    peak_tflops: dict = field(default_factory=dict)   # mma class -> table peak (what measured efficiencies scale)
    calibrated_mma: frozenset = frozenset()           # mma classes whose rate microbench measured on this GPU


def _arch_key(sm: int) -> str:
    return "sm75" if sm < 80 else "sm80+"


def _lookup(table: dict, fam: str, sm: int):
    return table.get((fam, _arch_key(sm)), table.get((fam, "any")))


def bandwidth_eff(eff: Efficiencies, cls: str, fam: str, m: float = 1) -> tuple[float, str]:
    """Fraction of DRAM bandwidth a kernel of family ``fam`` streaming format ``cls`` reaches at M rows."""
    if fam == "cpu":
        return 0.0, "runs on the CPU"
    base = eff.bandwidth_eff.get(cls, eff.bandwidth_eff.get("bf16", BANDWIDTH_EFF["bf16"][0]))
    base_src = "microbench (calibrated)" if cls in eff.calibrated else BANDWIDTH_EFF.get(cls, BANDWIDTH_EFF["bf16"])[1]
    if cls in eff.calibrated or fam == "native":
        return base, base_src
    entry = _lookup(FAMILY_BANDWIDTH_EFF, fam, eff.sm)
    if entry is None:
        return base, base_src
    value, src = entry
    return (base if value is None else value), src


def compute_eff(mma: str, sm: int, m: float = 1) -> tuple[float, str]:
    """Fraction of the table's dense peak a large GEMM on ``mma`` reaches ("none": the CUDA cores): the
    median measured BF16 GEMM efficiency at large M over every measured system (advisor.cost.measured),
    where no measured kernel of the call's shape applies (no measured system of the card's architecture,
    attention FLOPs without a measured kernel); a card with evidence gets per-call figures instead. (A raw
    mma.sync loop reaches 99 % of the per-SM peak, gpu-specs.md OBS; whole GEMMs measure well below.)"""
    if mma == "none":
        return CUDA_CORE_EFF
    from advisor.cost.measured import median_compute_efficiency

    return median_compute_efficiency()


def call_floor(fam: str, sm: int) -> tuple[float, str]:
    """Seconds one GEMM call takes at least."""
    return CALL_FLOOR_S


@dataclass(frozen=True)
class DequantCost:
    instr_per_element: float    # thread instructions to turn one stored value into an MMA input
    instr_source: str
    m_tile: int                 # rows per pass: the weights are converted again for every M tile
    overlap: float              # share of the conversion issue time hidden behind the tensor cores
    overlap_source: str
    load_overlap: float         # share of min(load, compute) that runs concurrently with the other
    load_overlap_source: str


def dequant_cost(fam: str, cls: str, sm: int) -> DequantCost | None:
    """What converting the weights costs a kernel of family ``fam`` on ``sm`` (None: nothing to convert)."""
    lo, lo_src = _lookup(LOAD_COMPUTE_OVERLAP, fam, sm) or (1.0, "")
    if cls not in WEIGHT_ONLY or fam in ("native", "cpu"):
        return DequantCost(0.0, "", 1, 1.0, "", lo, lo_src)
    ipe, ipe_src = DEQUANT_INSTR[cls]
    ov = _lookup(DEQUANT_OVERLAP_BY, fam, sm) or DEQUANT_OVERLAP
    tile = DEQUANT_M_TILE[0] if fam == "tiled" else 1 << 30   # a GEMV converts once per launch, a copy once
    return DequantCost(ipe, ipe_src, tile, ov[0], ov[1], lo, lo_src)


def cuda_core_tflops(gpu: GpuSpec, clock_mhz: float | None) -> tuple[float | None, str]:
    """Achievable FP32 FMA rate of the CUDA cores (what a GEMV multiplies on)."""
    lanes = FP32_LANES_PER_SM.get(tuple(gpu.cc))
    if not lanes or not gpu.sm_count or not clock_mhz:
        return None, f"{gpu.id}: FP32 lanes, SM count or clock unknown"
    peak = lanes * 2 * gpu.sm_count * clock_mhz * 1e6 / 1e12
    return peak * CUDA_CORE_EFF[0], (f"{lanes} FP32 lanes x 2 x {gpu.sm_count} SMs x {clock_mhz:g} MHz = {peak:.3g} "
                                     f"TFLOPS ({FP32_LANES_SOURCE}) x {CUDA_CORE_EFF[0]} ({CUDA_CORE_EFF[1]})")


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
            bound: GpuSpec | None = None, families: tuple[str, ...] = ()) -> Efficiencies:
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
    measured: set[str] = set()
    for cls, (v, src) in BANDWIDTH_EFF.items():
        if cal is not None and cls in cal.kernel_bandwidth_eff:
            bw[cls] = cal.kernel_bandwidth_eff[cls]
            measured.add(cls)
            out.append(Assumption(f"bandwidth_eff.{cls}", bw[cls], "fraction", cal_src, calibrated=True))
        else:
            bw[cls] = v
            out.append(Assumption(f"bandwidth_eff.{cls}", v, "fraction", src))
    if cal is not None and "moe_grouped" in cal.kernel_bandwidth_eff:
        bw["moe_grouped"] = cal.kernel_bandwidth_eff["moe_grouped"]
    else:
        bw["moe_grouped"] = MOE_BANDWIDTH_EFF[0]
    mma: dict[str, float] = {}
    peaks: dict[str, float] = {}
    cal_mma: set[str] = set()
    for m in dict.fromkeys(mma_classes):
        peak, key = peak_for_mma(gpu, m)
        if peak is not None:
            peaks[m] = peak
        if cal is not None and m in cal.mma_tflops:
            mma[m] = cal.mma_tflops[m]
            cal_mma.add(m)
            out.append(Assumption(f"mma_tflops.{m}", mma[m], "TFLOPS", cal_src, calibrated=True))
            continue
        if peak is None:
            continue
        ce, ce_src = compute_eff(m, gpu.sm)
        mma[m] = peak * ce
        out.append(Assumption(f"mma_tflops.{m}", mma[m], "TFLOPS",
                              f"table peak {key}={peak}{' (upper bound)' if upper else ''} x {ce:.4g} "
                              f"(compute efficiency: {ce_src}); used where no measured kernel of this shape "
                              "applies"))
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
    cores, cores_src = cuda_core_tflops(gpu, clock) if clock else (None, f"{gpu.id}: no clock")
    if "none" in mma_classes:
        out.append(Assumption("cuda_core_tflops", cores if cores is not None else "N/A", "TFLOPS", cores_src))
    for fam in dict.fromkeys(families):
        arch = _arch_key(gpu.sm)
        for name, table in (("load_compute_overlap", LOAD_COMPUTE_OVERLAP), ("dequant_overlap", DEQUANT_OVERLAP_BY),
                            ("bandwidth_eff", FAMILY_BANDWIDTH_EFF)):
            entry = _lookup(table, fam, gpu.sm)
            if entry is not None:
                value = entry[0] if entry[0] is not None else "per-format figure (above)"
                out.append(Assumption(f"{name}.{fam}.{arch}", value, "fraction" if entry[0] is not None else "",
                                      entry[1]))
    l2 = float(gpu.l2_mb or 0.0) * 2**20
    return Efficiencies(dram, bw, mma, deq, issue, tuple(out), upper, gpu.sm, cores, frozenset(measured), l2,
                        peaks, frozenset(cal_mma))
