"""The efficiencies of one GPU (``resolve``): the per-format and per-family figures of
advisor.cost.efficiency applied to its table entry (peaks, clock, SMs), replaced class by class by a
microbench calibration where it measured the engine's own kernel (advisor.calibration.ENGINE_KERNEL_CLASSES),
with an upper-bound entry standing in where the table has no peaks or clock."""

from __future__ import annotations

from dataclasses import replace

from advisor.calibration import ENGINE_KERNEL_CLASSES
from advisor.cost import efficiency
from advisor.cost.derived import Assumption
from advisor.cost.efficiency import Efficiencies
from advisor.gpu_spec import GpuSpec


def cuda_core_tflops(gpu: GpuSpec, clock_mhz: float | None) -> tuple[float | None, str]:
    """Achievable FP32 FMA rate of the CUDA cores (what a GEMV multiplies on)."""
    lanes = efficiency.FP32_LANES_PER_SM.get(tuple(gpu.cc))
    if not lanes or not gpu.sm_count or not clock_mhz:
        return None, f"{gpu.id}: FP32 lanes, SM count or clock unknown"
    peak = lanes * 2 * gpu.sm_count * clock_mhz * 1e6 / 1e12
    eff, eff_src = efficiency.CUDA_CORE_EFF
    return peak * eff, (f"{lanes} FP32 lanes x 2 x {gpu.sm_count} SMs x {clock_mhz:g} MHz = {peak:.3g} "
                        f"TFLOPS ({efficiency.FP32_LANES_SOURCE}) x {eff} ({eff_src})")


# Dense FP16 (FP16-accumulate) tensor FLOP per clock per SM: the same on every segment of a compute
# capability (gpu-specs.md "Derivation rules"), so peak / (SMs x rate) is the clock NVIDIA's peak implies.
FP16_FLOP_PER_CLK_SM: dict[tuple[int, ...], int] = {
    (7, 5): 1024, (8, 0): 2048, (8, 6): 1024, (8, 9): 1024, (9, 0): 4096, (10, 0): 8192, (10, 3): 8192, (11, 0): 8192,
    (12, 0): 1024, (12, 1): 1024}
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
    return float(v) if isinstance(v, (int, float)) else None     # None: unknown, or NOT_SUPPORTED


def peak_for_mma(gpu: GpuSpec, mma: str) -> tuple[float | None, str]:
    """The table peak (TFLOPS) for an MMA class and the key it came from."""
    key = efficiency.MMA_PEAK.get(mma)
    if key is None:
        return None, "none"
    v = _peak(gpu, key)
    if v is None and key == "bf16":          # Turing: no BF16, engines run FP16
        key, v = "fp16_fp32acc", _peak(gpu, "fp16_fp32acc")
    return v, key


def _with_upper_bound(gpu: GpuSpec, bound: GpuSpec) -> GpuSpec:
    """``gpu`` with its unknown peaks and clock taken from ``bound`` (figures that can only be lower)."""
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
    for cls, (v, src) in efficiency.BANDWIDTH_EFF.items():
        if cal is not None and cls in cal.kernel_bandwidth_eff and cls in ENGINE_KERNEL_CLASSES:
            bw[cls] = cal.kernel_bandwidth_eff[cls]
            measured.add(cls)
            out.append(Assumption(f"bandwidth_eff.{cls}", bw[cls], "fraction", cal_src, calibrated=True))
        else:
            bw[cls] = v
            out.append(Assumption(f"bandwidth_eff.{cls}", v, "fraction", src))
    if cal is not None:
        for cls in sorted(set(cal.kernel_bandwidth_eff) | set(cal.dequant_overhead)):
            if cls in ENGINE_KERNEL_CLASSES or cls == "moe_grouped":
                continue
            figs = ", ".join(f"{what} {fmt.format(d[cls])}" for what, d, fmt in (
                ("streams at M = 1 at", cal.kernel_bandwidth_eff, "{:.1%} of copy"),
                ("large-M time over cuBLAS", cal.dequant_overhead, "{:+.0%}")) if cls in d)
            out.append(Assumption(f"own_kernel.{cls}", figs, "", f"{cal_src}: nvfp4-advisor's own Triton {cls} "
                                  "kernel on this card, shown only: the engine runs its own kernel for this class "
                                  "(explain names it), whose figures plan keeps (advisor.calibration."
                                  "ENGINE_KERNEL_CLASSES)"))
    if cal is not None and "moe_grouped" in cal.kernel_bandwidth_eff:
        bw["moe_grouped"] = cal.kernel_bandwidth_eff["moe_grouped"]
    else:
        bw["moe_grouped"] = efficiency.MOE_BANDWIDTH_EFF[0]
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
        ce, ce_src = efficiency.compute_eff(m, gpu.sm)
        mma[m] = peak * ce
        out.append(Assumption(f"mma_tflops.{m}", mma[m], "TFLOPS",
                              f"table peak {key}={peak}{' (upper bound)' if upper else ''} x {ce:.4g} "
                              f"(compute efficiency: {ce_src}); used where no measured kernel of this shape "
                              "applies"))
    deq = {c: v for c, v in cal.dequant_overhead.items() if c in ENGINE_KERNEL_CLASSES} if cal is not None else {}
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
        issue = sms * efficiency.SCHEDULERS_PER_SM[0] * clock * 1e6
        out.append(Assumption("sm_clock", clock, "MHz", clock_src))
        out.append(Assumption("issue_rate", issue, "warp instr/s",
                              f"SMs {sms} x {efficiency.SCHEDULERS_PER_SM[0]} schedulers x {clock} MHz "
                              f"({efficiency.SCHEDULERS_PER_SM[1]})"))
    else:
        issue = 0.0
        out.append(Assumption("issue_rate", "N/A", "", f"{gpu.id}: the GPU table has no "
                              f"{'clock' if sms else 'SM count'} and none can be implied from a peak: "
                              "dequant issue time is unknown"))
    if not set(deq) & set(efficiency.DEQUANT_INSTR):
        for cls, (v, src) in efficiency.DEQUANT_INSTR.items():
            out.append(Assumption(f"dequant_instr_per_element.{cls}", v, "thread instr", src))
        out.append(Assumption("dequant_m_tile", efficiency.DEQUANT_M_TILE[0], "rows", efficiency.DEQUANT_M_TILE[1]))
    out.append(Assumption("dequant_overlap", efficiency.DEQUANT_OVERLAP[0], "fraction", efficiency.DEQUANT_OVERLAP[1]))
    if any(m.startswith(tuple(efficiency.SWAP_AB[1])) for m in mma_classes):
        out.append(Assumption("swap_ab_max_m", efficiency.SWAP_AB[0], "rows", efficiency.SWAP_AB[2]))
    cores, cores_src = cuda_core_tflops(gpu, clock) if clock else (None, f"{gpu.id}: no clock")
    if "none" in mma_classes:
        out.append(Assumption("cuda_core_tflops", cores if cores is not None else "N/A", "TFLOPS", cores_src))
    for fam in dict.fromkeys(families):
        arch = efficiency.arch_key(gpu.sm)
        for name, table in (("load_compute_overlap", efficiency.LOAD_COMPUTE_OVERLAP),
                            ("dequant_overlap", efficiency.DEQUANT_OVERLAP_BY),
                            ("bandwidth_eff", efficiency.FAMILY_BANDWIDTH_EFF)):
            entry = efficiency.lookup(table, fam, gpu.sm)
            if entry is not None:
                value = entry[0] if entry[0] is not None else "per-format figure (above)"
                out.append(Assumption(f"{name}.{fam}.{arch}", value, "fraction" if entry[0] is not None else "",
                                      entry[1]))
    l2 = float(gpu.l2_mb or 0.0) * 2**20
    return Efficiencies(dram, bw, mma, deq, issue, tuple(out), upper, gpu.sm, cores, frozenset(measured), l2,
                        peaks, frozenset(cal_mma))
