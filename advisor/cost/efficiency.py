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
the cost model's structure. advisor.cost.gpu_efficiency resolves them for one GPU.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from advisor.cost.derived import Assumption

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
FP32_LANES_PER_SM: dict[tuple[int, ...], int] = {
    (7, 0): 64, (7, 5): 64, (8, 0): 64, (8, 6): 128, (8, 7): 128, (8, 9): 128, (9, 0): 128, (10, 0): 128, (10, 3): 128,
    (11, 0): 128, (12, 0): 128, (12, 1): 128}
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

# A weight-only tiled kernel (Marlin) issues the warp-level mma.sync; where the card's own 16-bit GEMM
# issues an asynchronous MMA (wgmma on sm_90a, tcgen05.mma on sm_100/103: profiles/arch.yaml, PTX ISA)
# the measured BF16 efficiency it is charged comes from that faster instruction. No measurement of
# mma.sync throughput on those archs is at hand, so the compute term is a lower bound on time.
LEGACY_MMA_SYNC_NOTE = ("upper bound on speed: this weight-only kernel issues mma.sync, but the measured BF16 GEMM "
                        "standing in for it issues this card's wgmma/tcgen05.mma; mma.sync throughput on this "
                        "arch is unmeasured and may be lower")
# Where the card's measured system has a Marlin MoE table, that kernel family's own mma.sync rate caps the
# compute term instead (advisor.cost.measured.marlin_mma_sync_efficiency): the nearest measured evidence of
# the instruction, not of another one.
MARLIN_MMA_SYNC_NOTE = ("lower bound on speed: compute at the mma.sync rate measured for Marlin's MoE kernel on this "
                        "architecture (the dense Marlin GEMM is unmeasured here and may run above a grouped one; "
                        "the card's BF16 GEMMs issue the faster wgmma/tcgen05.mma)")


def legacy_mma_sync(mma: str, sm: int) -> bool:
    """True where ``mma`` is a warp-level 16-bit mma.sync but the card's 16-bit GEMMs issue an async MMA."""
    if not mma.startswith("hmma"):
        return False
    from advisor.arch_caps import caps_for

    native = caps_for((sm // 10, sm % 10)).mma_for("bf16") or ""
    return native.startswith(("wgmma", "tcgen05"))
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


def arch_key(sm: int) -> str:
    return "sm75" if sm < 80 else "sm80+"


def lookup(table: dict, fam: str, sm: int):
    return table.get((fam, arch_key(sm)), table.get((fam, "any")))


def bandwidth_eff(eff: Efficiencies, cls: str, fam: str, m: float = 1) -> tuple[float, str]:
    """Fraction of DRAM bandwidth a kernel of family ``fam`` streaming format ``cls`` reaches at M rows."""
    if fam == "cpu":
        return 0.0, "runs on the CPU"
    base = eff.bandwidth_eff.get(cls, eff.bandwidth_eff.get("bf16", BANDWIDTH_EFF["bf16"][0]))
    base_src = "microbench (calibrated)" if cls in eff.calibrated else BANDWIDTH_EFF.get(cls, BANDWIDTH_EFF["bf16"])[1]
    if cls in eff.calibrated or fam == "native":
        return base, base_src
    entry = lookup(FAMILY_BANDWIDTH_EFF, fam, eff.sm)
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


def dequant_cost(fam: str, cls: str, sm: int) -> DequantCost:
    """What converting the weights costs a kernel of family ``fam`` on ``sm`` (no instructions where
    nothing is converted)."""
    lo, lo_src = lookup(LOAD_COMPUTE_OVERLAP, fam, sm) or (1.0, "")
    if cls not in WEIGHT_ONLY or fam in ("native", "cpu"):
        return DequantCost(0.0, "", 1, 1.0, "", lo, lo_src)
    ipe, ipe_src = DEQUANT_INSTR[cls]
    ov = lookup(DEQUANT_OVERLAP_BY, fam, sm) or DEQUANT_OVERLAP
    tile = DEQUANT_M_TILE[0] if fam == "tiled" else 1 << 30   # a GEMV converts once per launch, a copy once
    return DequantCost(ipe, ipe_src, tile, ov[0], ov[1], lo, lo_src)
